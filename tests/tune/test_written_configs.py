"""The configs x-tune writes keep the user's paths, and ``--dry`` shows what the trials will run.

One study on the review sample, run from a folder of its own with every path relative (the configs in a
subfolder, data_dir as ``../reviews/data``): best_config.hjson and the trial configs keep data_dir as the
base config wrote it and, through the loader, name the same files; diff_params between the base config and
best_config.hjson reports no data_dir. The trial values ``x-tune --dry`` prints are the values trials 0-2
ran (TPE, two trials at once), in a space of 4 configurations where seed 4 draws trial 2 equal to trial 0
on its first draw: the runner draws again, and --dry (which used to list the first draw) shows that too."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest
from tune_helpers import BASE, load_study

from xdpx.chain import resolve_runs
from xdpx.cli import run_chain, x_script
from xdpx.config.loader import load_config
from xdpx.config.writers import read_args

SPACE = {"num_filters": {"type": "int", "values": [4, 8], "step": 4},
         "dropout": {"type": "categorical", "values": [0.0, 0.2]}}


def dry_values(out: str) -> dict[int, dict[str, object]]:
    """``#   trial 1: learning_rate=0.003, dropout=0.2`` lines of x-tune --dry -> {1: {...}}."""
    found = {}
    for line in out.splitlines():
        if line.startswith("#   trial "):
            number, _, rest = line[len("#   trial "):].partition(": ")
            found[int(number)] = {k: ast.literal_eval(v) for k, v in (p.split("=", 1) for p in rest.split(", "))}
    return found


@pytest.fixture(scope="module")
def study(reviews: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("relative_study")
    configs = root / "configs"
    configs.mkdir()
    data_dir = os.path.relpath(reviews, root)  # relative to the working directory, as users write it
    (configs / "train.hjson").write_text(json.dumps({"__parent__": "${data_dir}/meta", "data_dir": data_dir,
                                                     "save_dir": "unused", **BASE}))
    (configs / "space.hjson").write_text(json.dumps(SPACE))
    (configs / "tune.hjson").write_text(json.dumps({
        "space_config": "./space", "base_config": "./train", "save_dir": "study", "tuner": "tpe",
        "assess_start_step": 4, "assess_interval": 4, "parallel_runs": 2, "max_trials": 3,
        "heartbeat_interval": 2, "pruner": "none", "seed": 4}))
    before = os.getcwd()
    os.chdir(root)
    try:
        import contextlib
        import io

        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert run_chain(["x-tune", "configs/tune.hjson", "--dry"]) == 0
        assert not (root / "study").exists()  # --dry wrote nothing
        assert run_chain(["x-tune", "configs/tune.hjson"]) == 0
    finally:
        os.chdir(before)
    return {"root": root, "data_dir": data_dir, "dry": out.getvalue()}


def test_dry_shows_the_values_trials_0_to_2_run(study: dict) -> None:
    root: Path = study["root"]
    shown = dry_values(study["dry"])
    assert sorted(shown) == [0, 1, 2], study["dry"]
    trials = {t.number: t.params for t in load_study(root / "study").trials}
    assert sorted(trials) == [0, 1, 2]
    for number in range(3):
        assert shown[number] == trials[number], number
        ran = read_args(str(root / "study" / f"trial_{number}" / "args.py"))  # what x-train ran
        assert {k: ran[k] for k in shown[number]} == shown[number]
    assert len({json.dumps(v, sort_keys=True) for v in shown.values()}) == 3  # no repeat, like the runner


def test_written_configs_keep_relative_paths_and_name_the_same_files(study: dict,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    root: Path = study["root"]
    monkeypatch.chdir(root)  # where x-tune ran, and where its first lines say to run them from
    written = [root / "study" / "best_config.hjson"] + sorted((root / "study" / "configs").glob("trial_*.hjson"))
    assert len(written) == 4
    user = resolve_runs("x-train", "configs/train.hjson")[0]
    for path in written:
        text = path.read_text(encoding="utf-8")
        assert str(root) not in text.split("\n", 2)[2], path  # no absolute path below the two comment lines
        assert text.splitlines()[1] == f"# x-train it from {root}, where x-tune ran: relative paths are relative " \
                                       "to the working directory, as in the base config"
        assert load_config(str(path))[0].values["data_dir"] == study["data_dir"]
        args = resolve_runs("x-train", str(path))[0]
        assert os.path.realpath(args.data_dir) == os.path.realpath(user.data_dir)
        assert (Path(args.data_dir) / "meta.hjson").exists()
    best = resolve_runs("x-train", "study/best_config.hjson")[0]
    assert best.save_dir == os.path.join("study", "best_retrain")  # relative, as the tune config wrote save_dir


def test_diff_params_between_base_and_best_config_shows_no_data_dir(study: dict, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(study["root"])
    assert x_script(["diff_params", "configs/train.hjson", "study/best_config.hjson"]) == 0
    out = capsys.readouterr().out
    names = [line.split()[0] for line in out.splitlines()[1:]]
    assert "save_dir" in names and "data_dir" not in names, out
    assert set(names) <= set(SPACE) | {"save_dir", "eval_interval", "eval_interval_warmup", "resume", "overwrite",
                                      "auto_suffix", "train_steps"}, out
