"""A whole x-tune study on the review sample: real x-train trial processes, pruning, a failing trial,
the outputs (results.tsv, overview.png, best_config.hjson), save_above_score, x-viz and aggregate_results
on the study folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tune_helpers import SPACE, load_study, tune, write_json, write_study

from xdpx.cli import run_chain, x_script
from xdpx.config.writers import read_args
from xdpx.tune.results import STATE_COLORS


def colored(pixels, color: str, alpha: float) -> int:
    """Pixels of ``color`` drawn with ``alpha`` over white (the solid middle of a curve)."""
    import numpy as np

    rgb = 1 - alpha * (1 - np.array([int(color[i: i + 2], 16) / 255 for i in (1, 3, 5)]))
    return int((np.abs(pixels - rgb) <= 0.04).all(axis=-1).sum())


@pytest.fixture(scope="module")
def study(reviews: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """4 trials, one at a time; batch_size 512 is larger than the 240 training samples: those trials fail.
    Successive halving (keep half) prunes a trial worse than an earlier one at a rung (updates 4, 8); one
    at a time, the trials' order and values are fixed by the seed, so the same trial is pruned every run
    (several workers at once are tested in test_concurrent_workers.py and test_resume_and_workers.py)."""
    root = tmp_path_factory.mktemp("tune_study")
    space = {**SPACE, "batch_size": {"type": "categorical", "values": [16, 512]}}
    path = write_study(root, reviews, space=space, save_above_score=0.55, min_ref=0, parallel_runs=1,
                       pruner="successive_halving")
    assert tune(path) == 0
    return root / "study"


def test_results_table_and_trial_runs(study: Path) -> None:
    import pandas as pd

    table = pd.read_csv(study / "results.tsv", sep="\t")
    assert list(table.columns) == ["trial", "state", "learning_rate", "num_filters", "dropout", "batch_size",
                                   "best_accuracy", "best_step", "last_step", "updates", "save_dir", "error"]
    assert list(table["trial"]) == [0, 1, 2, 3]
    failed = table[table["state"] == "fail"]
    assert set(failed["trial"]) == set(table[table["batch_size"] == 512]["trial"]) != set()
    assert all("larger than the training set" in e for e in failed["error"])
    ran = table[table["state"] != "fail"]
    assert set(ran["state"]) == {"complete", "pruned"}, list(table["state"])  # a pruned trial is required
    for row in ran.itertuples():
        args = read_args(str(study / f"trial_{row.trial}" / "args.py"))  # args.py holds the sampled values
        assert args["learning_rate"] == pytest.approx(row.learning_rate, rel=1e-5)
        assert (args["num_filters"], args["dropout"], args["batch_size"]) == (row.num_filters, row.dropout, 16)
        assert args["save_dir"] == str(study / f"trial_{row.trial}")
        assert (study / f"trial_{row.trial}" / "valid.log.tsv").exists()
    for row in ran.itertuples():  # the updates trained, from the trial's own last evaluation
        log = pd.read_csv(study / f"trial_{row.trial}" / "valid.log.tsv", sep="\t")
        assert row.updates == log["step"].iloc[-1] >= row.last_step
    for row in table[table["state"] == "pruned"].itertuples():
        assert row.last_step < 16  # stopped before the end
        assert row.updates == row.last_step  # stopped at the evaluation it reported
        assert "| pruned: " in (study / f"trial_{row.trial}" / "log.txt").read_text()
    trials = load_study(study).trials
    assert [t.state.name.lower() for t in trials] == list(table["state"])


def test_save_above_score_removes_checkpoints_of_trials_below(study: Path) -> None:
    import pandas as pd

    table = pd.read_csv(study / "results.tsv", sep="\t")
    for row in table[table["state"] != "fail"].itertuples():
        kept = sorted(p.name for p in (study / f"trial_{row.trial}").glob("*.pt"))
        assert bool(kept) == (row.best_accuracy > 0.55), (row.trial, row.best_accuracy, kept)


def test_best_config_reproduces_the_best_trial(study: Path) -> None:
    import pandas as pd

    table = pd.read_csv(study / "results.tsv", sep="\t")
    best = table[table["state"] == "complete"].sort_values("best_accuracy", ascending=False).iloc[0]
    assert run_chain(["x-train", str(study / "best_config.hjson")]) == 0
    rerun = read_args(str(study / "best_retrain" / "args.py"))
    assert rerun["learning_rate"] == pytest.approx(best.learning_rate, rel=1e-5)
    rows = (study / "best_retrain" / "valid.log.tsv").read_text().splitlines()
    header = rows[0].split("\t")
    scores = [float(r.split("\t")[header.index("accuracy")]) for r in rows[1:]]
    assert max(scores) == pytest.approx(best.best_accuracy)  # same config and seed: the same run (CPU)


def test_overview_and_tools_on_the_study_folder(study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import pandas as pd

    overview = (study / "overview.png").read_bytes()
    assert overview[:8] == b"\x89PNG\r\n\x1a\n" and len(overview) > 10_000
    from matplotlib.image import imread

    pixels = imread(str(study / "overview.png"))[..., :3]
    assert pixels.shape == (600, 1000, 3) and pixels.std() > 0.05  # 10 x 6 inches at 100 dpi, not blank
    states = list(pd.read_csv(study / "results.tsv", sep="\t")["state"])
    assert colored(pixels, "#2ca02c", 1.0) > 20  # the best trial's curve and star
    assert colored(pixels, STATE_COLORS["pruned"], 0.75) > 20  # the pruned trial's curve (required above)
    complete = colored(pixels, STATE_COLORS["complete"], 0.75)  # complete trials other than the best
    assert (complete > 20) == (states.count("complete") > 1), (complete, states)
    assert x_script(["aggregate_results", str(study), "-trial_"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    ran = [p for p in sorted(study.glob("trial_*")) if (p / "args.py").exists()]
    assert [line.split("\t")[0] for line in out[1:]] == [str(p) for p in ran]
    status = dict(line.split("\t")[0::5] for line in out[1:])
    table = pd.read_csv(study / "results.tsv", sep="\t")
    for row in table[table["state"] != "fail"].itertuples():
        assert status[row.save_dir] == {"complete": "done", "pruned": "pruned"}[row.state]
    config = write_json(tmp_path / "viz.hjson", {"save_dir": str(study)})
    assert run_chain(["x-viz", str(config)]) == 0
    for folder in ran:
        assert (folder / "plots" / "accuracy.png").exists()


def test_running_again_adds_nothing_to_a_finished_study(study: Path) -> None:
    before = json.dumps([(t.number, t.state.name, t.value) for t in load_study(study).trials])
    assert tune(study.parent / "tune.hjson") == 0
    assert json.dumps([(t.number, t.state.name, t.value) for t in load_study(study).trials]) == before


def test_another_study_is_refused_in_this_study_folder(study: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # workers of one study share its folder (test_concurrent_workers.py); another study would rewrite its
    # results.tsv, best_config.hjson and trial_N run directories (xdpx/io/writer_lock.py)
    assert json.loads((study / ".xdpx-study").read_text()) == {"storage": "study.db in save_dir", "study": "x-tune"}
    other = study.parent / "other.hjson"
    other.write_text(json.dumps({**json.loads((study.parent / "tune.hjson").read_text()), "study_name": "other"}))
    before = {p: p.stat().st_mtime_ns for p in study.rglob("*")}
    for flags in (["--dry"], []):
        capsys.readouterr()
        assert run_chain(["x-tune", str(other), *flags]) == 2
        assert capsys.readouterr().err == (
            f"x-tune: error: {other}: key 'save_dir': x-tune refuses to write '{study}': it holds the outputs of "
            "study 'x-tune' of storage study.db in save_dir: x-tune workers share a folder only within one study "
            "(this config: study 'other' of storage study.db in save_dir). Choose another save_dir, or the "
            "study_name and storage of that study\n")
        assert {p: p.stat().st_mtime_ns for p in study.rglob("*")} == before
