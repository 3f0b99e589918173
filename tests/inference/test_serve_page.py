"""x-serve's GET / page, driven in a real headless Chromium (Debian's ``chromium`` through Playwright): a text
typed and submitted shows the server's label and one bar per label as wide as its probability, the server's
error text for a bad input, the words and scores of POST /explain shaded, the same by keyboard alone, a 360 px
window without horizontal scrolling, names shown as text, and the other kinds of answer against the server's
own: a pair run's score, an NER run's entities marked in the text, a bi-encoder's cosine and embedding, a
multi-label set; screenshots that are not blank. CI installs Chromium (.ci/run) and sets
XDPX_REQUIRE_BROWSER=1, so there a missing browser or driver fails these tests instead of skipping them.

XDPX_SCREENSHOT_DIR=folder keeps the screenshots (docs/img/serve_page.png is bench/bench_serve_page.py's).
"""

from __future__ import annotations

import io
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from inference_helpers import REPO, SAMPLE, train_run, write_json
from serve_helpers import TEXTS, Server, request, running_server

from xdpx.cli import run_chain
from xdpx.io.testing import unavailable
from xdpx.serve.page import page_response

BROWSER_FLAG = "XDPX_REQUIRE_BROWSER"


def chromium_executable() -> str:
    """The system's Chromium (XDPX_CHROMIUM, else ``chromium`` on the PATH); without one the test skips, or
    fails where XDPX_REQUIRE_BROWSER=1 (CI)."""
    executable = os.environ.get("XDPX_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not executable or not os.access(executable, os.X_OK):
        unavailable(BROWSER_FLAG, f"no chromium {'at ' + executable if executable else 'on the PATH'} "
                                  "(apt-get install -y chromium)")
    return executable


def test_a_missing_browser_fails_where_ci_requires_one(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDPX_CHROMIUM", str(tmp_path / "no-chromium"))
    monkeypatch.setenv(BROWSER_FLAG, "1")
    with pytest.raises(pytest.fail.Exception, match=f"{BROWSER_FLAG}=1 but no chromium at .*no-chromium"):
        chromium_executable()
    monkeypatch.delenv(BROWSER_FLAG)
    with pytest.raises(pytest.skip.Exception, match="apt-get install -y chromium"):
        chromium_executable()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium: the system's, never a download (Playwright's own cannot be fetched offline)."""
    executable = chromium_executable()
    try:
        # lazy: optional package, a skip (or a failure) when absent
        from playwright.sync_api import sync_playwright
    except ImportError as e:
        unavailable(BROWSER_FLAG, f"playwright does not import ({e}): pip install -e '.[test]'")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def server(cnn_run: Path) -> Iterator[Server]:
    with running_server(cnn_run) as running:
        yield running


class Page:
    """A browser tab on the page of ``server``, recording the console's errors and the page's exceptions."""

    def __init__(self, browser: Any, server: Server, width: int = 1000, height: int = 760) -> None:
        self.tab = browser.new_page(viewport={"width": width, "height": height})
        self.problems: list[str] = []
        # the browser logs each answer of status 400 (a bad input, asked for) as an error too; anything else
        # (a script error, what the Content-Security-Policy refused, another failed request) is a problem
        self.tab.on("console", lambda m: self.problems.append(m.text) if m.type == "error" and not m.text.startswith(
            "Failed to load resource: the server responded with a status of 400") else None)
        self.tab.on("pageerror", lambda e: self.problems.append(str(e)))
        self.response = self.tab.goto(f"http://{server.address[0]}:{server.address[1]}/")

    def answer(self) -> str:
        """Wait for the answer (or the error) of the prediction just asked, and say which came."""
        self.tab.wait_for_selector("body[data-state]")
        return self.tab.get_attribute("body", "data-state")

    def submit(self, *texts: str) -> str:
        self.tab.evaluate("delete document.body.dataset.state")
        for box, text in zip(["#text1", "#text2"], texts):
            self.tab.fill(box, text)
        self.tab.click("#submit")
        return self.answer()

    def bars(self) -> list[tuple[str, float, float]]:
        """(label, the probability it shows, its bar's width / its track's width) of each bar."""
        return [(li.get_attribute("data-label"), float(li.get_attribute("data-probability")),
                 li.eval_on_selector(".bar", "b => b.getBoundingClientRect().width / b.parentElement.getBoundingClientRect().width"))
                for li in self.tab.query_selector_all("#bars li")]

    def close(self) -> None:
        self.tab.close()


def check_screenshot(png: bytes, name: str) -> None:
    """The PNG decodes, is mostly not one colour, and holds many colours (text, bars): not a blank page."""
    from PIL import Image  # lazy: only the screenshot checks decode PNGs

    image = Image.open(io.BytesIO(png)).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 20)
    background = max(colours)[0] / (image.width * image.height)
    assert len(colours) > 50 and background < 0.9, (len(colours), background)
    folder = os.environ.get("XDPX_SCREENSHOT_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / name).write_bytes(png)


def predict(server: Server, *texts: str) -> Any:
    status, answer, _ = request(server.address, "POST", "/predict", json.dumps([list(texts)]).encode("utf-8"))
    return status, answer


def explain(server: Server, *texts: str) -> Any:
    status, answer, _ = request(server.address, "POST", "/explain", json.dumps([list(texts)]).encode("utf-8"))
    return status, answer


def test_a_text_shows_the_label_and_one_bar_per_label(browser: Any, server: Server, cnn_run: Path) -> None:
    page = Page(browser, server)
    policy = page.response.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "script-src 'nonce-" in policy
    _, info, _ = request(server.address, "GET", "/info")
    assert page.tab.text_content("#run-name") == info["run"] and info["model"] == "cls_cnn"
    assert info["metrics_of"].startswith("dev at update ") and 0 <= info["metrics"]["accuracy"] <= 1
    assert info["data"]["samples"] == "dev 60, test 60, train 240" and info["data"]["tokenizer"] == "char_zh"
    assert str(cnn_run.parent) not in json.dumps(info, ensure_ascii=False)  # names, never a path
    assert page.tab.locator("#metric-table tr").count() == len(info["metrics"])
    for text in TEXTS[:3]:
        status, (expected,) = predict(server, text)
        assert status == 200 and page.submit(text) == "answered"
        assert page.tab.text_content("#answer strong") == expected["label"]
        bars = page.bars()
        assert [label for label, _, _ in bars] == list(expected["probabilities"]) == ["neg", "pos"]
        for label, shown, width in bars:
            assert abs(shown - expected["probabilities"][label]) < 1e-6 and abs(width - shown) < 0.01, bars
    assert page.tab.locator("#bars li.chosen").count() == 1
    # the shading of /explain where the server has it: the server's words and scores, green for a positive
    # score; a server without it: the section stays hidden
    if "/explain" in info["routes"]:
        status, (explained,) = explain(server, TEXTS[2])
        tokens = [(t.text_content(), float(t.get_attribute("data-score")),
                   t.evaluate("t => getComputedStyle(t).backgroundColor"))
                  for t in page.tab.query_selector_all("#tokens .token")]
        assert status == 200 and [(w, s) for w, s, _ in tokens] == [(w, s) for w, s in explained["tokens"]], tokens
        assert all(colour.startswith("rgba(46, 160, 67" if s >= 0 else "rgba(214, 40, 57") for _, s, colour in tokens)
        assert page.tab.text_content("#tokens .token-row .muted") == f"{explained['target']}: "
    else:
        assert page.tab.is_hidden("#attributions")
    check_screenshot(page.tab.screenshot(full_page=True), "serve_page_cnn.png")
    assert not page.problems, page.problems  # no script error, nothing the CSP refused
    page.close()


def test_a_bad_input_shows_the_servers_message(browser: Any, server: Server) -> None:
    page = Page(browser, server)
    for text in ["", "   ", "好" * 10001]:
        status, answer = predict(server, text)
        assert status == 400 and page.submit(text) == "failed"
        shown = page.tab.text_content("#error")
        assert shown == answer["error"] and ("empty text" in shown or "a text of 10001 characters" in shown), shown
        assert page.tab.is_hidden("#result") and "Traceback" not in page.tab.content()
    assert page.submit(TEXTS[0]) == "answered" and page.tab.is_hidden("#error")  # the next answer clears it
    page.close()


def test_keyboard_alone_predicts(browser: Any, server: Server) -> None:
    page = Page(browser, server)
    tab = page.tab
    assert tab.evaluate("document.activeElement.id") == "text1"  # the text box has the focus on load
    tab.keyboard.type(TEXTS[1])
    tab.keyboard.press("Control+Enter")
    assert page.answer() == "answered" and tab.text_content("#answer strong") in ("neg", "pos")
    tab.evaluate("delete document.body.dataset.state")
    tab.keyboard.press("Tab")  # the next stop is the button, and its focus is visible
    assert tab.evaluate("document.activeElement.id") == "submit"
    assert tab.evaluate("getComputedStyle(document.activeElement).outlineStyle") != "none"
    tab.keyboard.press("Enter")
    assert page.answer() == "answered" and tab.is_visible("#bars li")
    labels = tab.evaluate("[...document.querySelectorAll('textarea')].every(t => t.labels.length === 1)")
    assert labels  # every text box has its label
    assert not page.problems, page.problems
    page.close()


def test_a_narrow_window_does_not_scroll_sideways(browser: Any, server: Server) -> None:
    page = Page(browser, server, width=360, height=640)
    assert page.submit("这家酒店的服务非常好，房间干净整洁，早餐也很丰富，下次还会再来" * 3) == "answered"
    widths = page.tab.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1] == 360, widths
    for selector in ["#text1", "#submit", "#bars", "#metric-table"]:
        box = page.tab.locator(selector).bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 360, (selector, box)
    check_screenshot(page.tab.screenshot(full_page=True), "serve_page_narrow.png")
    page.close()


def test_what_the_server_names_is_shown_as_text(browser: Any, server: Server) -> None:
    """A run or label named like markup is shown as those characters; nothing of it runs."""
    evil = '</script><img src=x onerror="document.title=\'owned\'">&amp;'
    html, headers = page_response({"run": evil, "model": "cls_cnn", "labels": [evil], "texts_per_input": 1,
                                   "metrics": {evil: 0.5}, "data": {"data_dir": evil}, "routes": ["/predict"]})
    assert "</script><img" not in html
    page = Page(browser, server)
    page.tab.route("**/", lambda route: route.fulfill(status=200, body=html, headers={**headers,
                                                                                      "Content-Type": "text/html"}))
    page.tab.goto(page.tab.url)
    assert page.tab.text_content("#run-name") == evil and page.tab.locator("img").count() == 0
    assert page.tab.title() != "owned" and evil in page.tab.text_content("#metric-table")
    page.close()


@pytest.fixture(scope="module")
def pair_run(prepared: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny match_cnn on the STS-B pairs (a regression: a score, no bars)."""
    return train_run(tmp_path_factory.mktemp("pair_run"), prepared("stsb_pair"), model="match_cnn", hidden_size=16,
                     num_filters=..., pooling="mean", max_epoch=1, loss="mse", major_metric="pearson")


def test_a_pair_run_has_two_text_boxes_and_shows_its_score(browser: Any, pair_run: Path) -> None:
    with running_server(pair_run) as pair_server:
        page = Page(browser, pair_server)
        assert page.tab.is_visible("#text2") and page.tab.text_content("#text1-label") == "First text"
        first, second = "A man is playing a guitar .", "A man plays the guitar ."
        status, (expected,) = predict(pair_server, first, second)
        assert status == 200 and page.submit(first, second) == "answered"
        assert abs(float(page.tab.text_content("#answer strong")) - expected["score"]) < 1e-4
        assert page.tab.locator("#bars li").count() == 0
        status, answer = predict(pair_server, first, "")
        assert status == 400 and page.submit(first, "") == "failed"
        assert page.tab.text_content("#error") == answer["error"] == "input 0: empty text"
        assert not page.problems, page.problems
        page.close()


@pytest.fixture(scope="module")
def ner_run(prepared: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny BiLSTM-CRF tagger on the committed People's Daily sample."""
    return train_run(tmp_path_factory.mktemp("ner_run"), prepared("peoples_daily_ner"), task="ner", model="lstm_ner",
                     crf=True, loss="token_cross_entropy", hidden_size=16, num_filters=..., kernel_sizes=...,
                     learning_rate=0.1, batch_size=32, max_epoch=..., max_update=20, eval_interval=10,
                     major_metric="entity_f1")


def test_an_ner_run_marks_the_entities_in_the_text(browser: Any, ner_run: Path) -> None:
    text = "中共中央总书记、国家主席江泽民在北京发表新年讲话，祝福全国各族人民新年快乐"
    with running_server(ner_run) as ner_server:
        status, (expected,) = predict(ner_server, text)
        page = Page(browser, ner_server)
        assert status == 200 and page.submit(text) == "answered"
        marks = page.tab.query_selector_all("#entity-text mark")
        shown = [(m.evaluate("m => m.firstChild.textContent"), m.get_attribute("data-type")) for m in marks]
        assert shown == [(e["text"], e["type"]) for e in expected["entities"]], (shown, expected)
        assert expected["entities"], "the tagger found no entity: nothing was marked"
        # the marked text reads as the input (each mark adds its type after the entity)
        plain = page.tab.evaluate("""() => { const box = document.getElementById('entity-text').cloneNode(true);
            box.querySelectorAll('.kind').forEach(k => k.remove()); return box.textContent; }""")
        assert plain == text
        check_screenshot(page.tab.screenshot(full_page=True), "serve_page_ner.png")
        assert not page.problems, page.problems
        page.close()


@pytest.fixture(scope="module")
def bi_encoder_run(prepared: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny bi_encoder on the STS-B pairs (cosine_similarity loss)."""
    return train_run(tmp_path_factory.mktemp("bi_encoder_run"), prepared("stsb_words_bi_encoder"), model="bi_encoder",
                     embedding_dim=16, hidden_size=16, embedding_size=16, num_filters=..., kernel_sizes=...,
                     loss="cosine_similarity", major_metric="pearson", max_epoch=1)


def test_a_bi_encoder_compares_two_texts_and_embeds_one_with_its_neighbours(browser: Any, bi_encoder_run: Path,
                                                                            tmp_path: Path) -> None:
    first, second = "A man is playing a guitar .", "A man plays the guitar ."
    corpus = tmp_path / "corpus.txt"  # the dev split's first sentences: what POST /search retrieves from
    lines = (SAMPLE / "stsb/dev.tsv").read_text(encoding="utf-8").splitlines()
    corpus.write_text("".join(line.split("\t")[5] + "\n" for line in lines[:30]), encoding="utf-8")
    with running_server(bi_encoder_run, "--corpus", str(corpus)) as bi_server:
        status, (expected,) = predict(bi_server, first, second)
        embedded = request(bi_server.address, "POST", "/embed", json.dumps([first]).encode("utf-8"))[1][0]
        found = request(bi_server.address, "POST", "/search", json.dumps({"query": first, "k": 5}).encode("utf-8"))
        page = Page(browser, bi_server)
        assert "leave it empty" in page.tab.text_content("#second label")
        assert status == 200 and page.submit(first, second) == "answered"
        assert abs(float(page.tab.text_content("#answer strong")) - expected["cosine"]) < 1e-4
        assert page.tab.is_hidden("#neighbours")  # two texts: no search
        assert page.submit(first, "") == "answered"  # one text: POST /embed, then POST /search
        assert page.tab.text_content("#answer") == f"an embedding of {len(embedded['embedding'])} numbers"
        shown = [(li.evaluate("li => li.firstChild.textContent"), float(li.text_content().rsplit(" ", 1)[1]))
                 for li in page.tab.query_selector_all("#neighbour-list li")]
        hits = found[1]["hits"]
        assert found[0] == 200 and len(hits) == 5 and [text for text, _ in shown] == [h["text"] for h in hits]
        assert all(abs(score - h["score"]) < 1e-3 for (_, score), h in zip(shown, hits)), (shown, hits)
        assert not page.problems, page.problems
        page.close()


@pytest.fixture(scope="module")
def multilabel_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny cls_cnn with multilabel_bce on the committed People's Daily name-kind sample (5 labels)."""
    root = tmp_path_factory.mktemp("multilabel_run")
    config = write_json(root / "prepro.json", {"__parent__": str(REPO / "examples/multilabel/prepro_char"),
                                               "data_source": str(REPO / "examples/multilabel/data"),
                                               "data_files": "*.txt", "data_dir": str(root / "data"), "workers": 1})
    assert run_chain(["x-prepro", str(config)]) == 0
    return train_run(root, root / "data", loss="multilabel_bce", major_metric="micro_f1", max_epoch=1,
                     decision_threshold=0.4)


def test_a_multilabel_run_shows_its_label_set_and_a_bar_per_label(browser: Any, multilabel_run: Path) -> None:
    text = "国家主席江泽民在北京发表新年讲话"
    with running_server(multilabel_run) as ml_server:
        status, (expected,) = predict(ml_server, text)
        page = Page(browser, ml_server)
        assert status == 200 and page.submit(text) == "answered"
        assert page.tab.text_content("#answer strong") == (", ".join(expected["labels"]) or "no label")
        bars = page.bars()
        assert [label for label, _, _ in bars] == list(expected["probabilities"]) and len(bars) == 5
        for label, shown, width in bars:
            assert abs(shown - expected["probabilities"][label]) < 1e-6 and abs(width - shown) < 0.01, bars
        chosen = [li.get_attribute("data-label") for li in page.tab.query_selector_all("#bars li.chosen")]
        assert chosen == [label for label in expected["probabilities"] if label in expected["labels"]]
        assert not page.problems, page.problems
        page.close()
