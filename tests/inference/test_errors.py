"""x-script errors on a real tiny run: the most confident mistakes (ranked by probability, all wrong), the most
confused pairs and per-label scores agree with x-pred's predictions of the same split; the HTML page is
self-contained; bad inputs are refused before anything is written."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from inference_helpers import REPO, write_json

from xdpx.cli import run_chain, x_script
from xdpx.scripts.error_analysis import (
    confused_pairs,
    confusion_counts,
    most_confident_mistakes,
    per_label_scores,
)


def read_tsv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def test_the_analysis_on_hand_made_predictions() -> None:
    labels = ["a", "b", "c"]
    probabilities = np.array([[0.2, 0.7, 0.1], [0.9, 0.05, 0.05], [0.1, 0.1, 0.8], [0.3, 0.6, 0.1], [0.5, 0.4, 0.1]])
    targets = np.array([0, 0, 1, 0, 1])  # wrong: 0 (b, 0.7), 2 (c, 0.8), 3 (b, 0.6), 4 (a, 0.5)
    mistakes = most_confident_mistakes(probabilities, targets, ["t0", "t1", "t2", "t3", "t4"], labels, 3)
    assert [(m.index, m.predicted, m.gold) for m in mistakes] == [(2, "c", "b"), (0, "b", "a"), (3, "b", "a")]
    assert mistakes[0].probability == 0.8 and mistakes[0].gold_probability == pytest.approx(0.1)
    counts = confusion_counts(probabilities.argmax(axis=1), targets, 3)
    pairs = confused_pairs(counts, labels, 10)
    assert [(p.gold, p.predicted, p.count) for p in pairs] == [("a", "b", 2), ("b", "a", 1), ("b", "c", 1)]
    assert pairs[0].share == pytest.approx(2 / 3)
    a, b, c = per_label_scores(counts, labels)
    assert (a.support, a.predicted, a.precision, a.recall) == (3, 2, 0.5, pytest.approx(1 / 3))
    assert (b.precision, b.recall, c.precision, c.support) == (0.0, 0.0, 0.0, 0)


@pytest.fixture(scope="module")
def report(cnn_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("errors") / "dev_errors"
    assert x_script(["errors", str(cnn_run), str(out), "--split", "dev", "--top", "8", "--attributions", "off"]) == 0
    return out


def test_errors_lists_the_most_confident_mistakes_of_the_split(report: Path, cnn_run: Path, tmp_path: Path) -> None:
    predictions = tmp_path / "dev.tsv"
    config = write_json(tmp_path / "pred.hjson", {"save_dir": str(cnn_run), "predict_file_map": {"dev": str(predictions)},
                                                  "cuda": False})
    assert run_chain(["x-pred", str(config)]) == 0
    predicted = read_tsv(predictions)
    wrong = sorted((float(r["prob"]) for r in predicted if r["label"] != r["predict"]), reverse=True)
    mistakes = read_tsv(report / "mistakes.tsv")
    assert 0 < len(mistakes) == min(8, len(wrong))
    assert [float(m["probability"]) for m in mistakes] == pytest.approx(wrong[: len(mistakes)], abs=1e-4)
    for m in mistakes:
        assert m["gold"] != m["predicted"]
        row = predicted[int(m["index"])]  # index: the sample's position in the split, as x-pred writes it
        assert (row["label"], row["predict"]) == (m["gold"], m["predicted"])
        assert float(m["gold_probability"]) == pytest.approx(float(row[f"prob_{m['gold']}"]), abs=1e-4)
    labels = read_tsv(report / "per_label.tsv")
    assert sum(int(r["support"]) for r in labels) == len(predicted) == 60
    for r in labels:
        right = sum(1 for p in predicted if p["label"] == p["predict"] == r["label"])
        assert float(r["recall"]) == pytest.approx(right / int(r["support"]), abs=1e-4)
    pairs = read_tsv(report / "confused_pairs.tsv")
    assert sum(int(p["count"]) for p in pairs) == len(wrong)


def test_the_html_summary_is_one_self_contained_page(report: Path) -> None:
    page = (report / "errors.html").read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    assert "Most confused pairs" in page and "most confident mistakes" in page and ">pos<" in page
    assert "http://" not in page and "https://" not in page and "<script" not in page and "src=" not in page
    first = read_tsv(report / "mistakes.tsv")[0]
    assert first["text"][:10] in page


def test_mistakes_of_a_raw_file_come_with_attributions_in_their_own_words(cnn_run: Path, tmp_path: Path) -> None:
    pytest.importorskip("captum")
    raw = REPO / "examples/data/sample/reviews/dev.txt"
    out = tmp_path / "explained"
    assert x_script(["errors", str(cnn_run), str(out), "--split", str(raw), "--top", "3", "--attributions", "on"]) == 0
    mistakes = read_tsv(out / "mistakes.tsv")
    texts = [line.split("\t")[0] for line in raw.read_text(encoding="utf-8").splitlines()]
    assert len(mistakes) == 3
    for m in mistakes:
        assert m["text"] == texts[int(m["index"])]  # the review as written, not its decoded tokens
        pairs = [cell.rsplit(":", 1) for cell in m["attributions"].split(" ")]
        words = [word for word, _ in pairs]
        scores = [float(score) for _, score in pairs]
        assert "".join(words) == m["text"].replace(" ", "") and any(s != 0 for s in scores)
    page = (out / "errors.html").read_text(encoding="utf-8")
    assert page.count('class="tok"') >= sum(len(m["attributions"].split(" ")) for m in mistakes)
    assert "Integrated Gradients" in page


def test_bad_inputs_are_refused_and_nothing_is_written(cnn_run: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert x_script(["errors", str(cnn_run), str(out), "--split", "nope"]) == 2
    assert "'nope' is neither a split" in capsys.readouterr().err
    unlabelled = tmp_path / "unlabelled.txt"
    unlabelled.write_text("这个酒店很好\n", encoding="utf-8")
    assert x_script(["errors", str(cnn_run), str(out), "--split", str(unlabelled)]) == 2
    assert "has no labels" in capsys.readouterr().err
    assert x_script(["errors", str(cnn_run), str(out), "--top", "x"]) == 2
    assert x_script(["errors", str(cnn_run), str(out), "--attributions", "maybe"]) == 2
    assert not out.exists()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    assert x_script(["errors", str(cnn_run), str(mine)]) == 2
    assert "XDPX did not write" in capsys.readouterr().err and sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
