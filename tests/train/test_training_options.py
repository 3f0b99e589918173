"""ema_decay, max_loss, min_steps, exclude_valid_from_train and keep_best_checkpoints, each by its outcome."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from train_helpers import assert_same_weights, final_weights, train, write_config

from xdpx.cli import run_chain
from xdpx.models.checkpoints import load_torch

RUNNER = Path(__file__).resolve().parent / "kill_runner.py"
EMA = {"ema_decay": 0.9, "eval_interval": 7, "log_interval": 3, "viz": False}


def run_runner(config: Path, where: str, n: int) -> int:
    return subprocess.run([sys.executable, str(RUNNER), str(config), where, str(n)], capture_output=True,
                          text=True, timeout=120).returncode


def read_tsv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


# ---- ema_decay ----------------------------------------------------------------------------------------------
def test_ema_checkpoints_hold_the_average_of_the_training_weights(reviews, tmp_path):
    """checkpoint-k = d * checkpoint-(k-1) + (1 - d) * (the training weights after update k), where the
    training weights come from the same run without ema_decay (the average never changes training)."""
    common = {"max_update": 3, "eval_interval": 1, "viz": False, "warmup_steps": 1}
    plain = write_config(tmp_path / "plain.hjson", reviews, tmp_path / "plain", **common)
    averaged = write_config(tmp_path / "ema.hjson", reviews, tmp_path / "ema", ema_decay=0.75, **common)
    assert train(plain) == 0 and train(averaged) == 0
    assert_same_weights(final_weights(tmp_path / "ema"), final_weights(tmp_path / "plain"))
    for step in (2, 3):
        before = load_torch(str(tmp_path / "ema" / f"checkpoint-{step - 1}.pt"))
        trained = load_torch(str(tmp_path / "plain" / f"checkpoint-{step}.pt"))
        got = load_torch(str(tmp_path / "ema" / f"checkpoint-{step}.pt"))
        for key in got:
            expected = 0.75 * before[key] + 0.25 * trained[key]
            assert torch.allclose(got[key], expected, rtol=0, atol=1e-6), key
            assert not torch.equal(got[key], trained[key]), f"{key}: the checkpoint holds the training weights"
    state = load_torch(str(tmp_path / "ema" / "state.pt"))
    assert state["ema"]["decay"] == 0.75
    last = load_torch(str(tmp_path / "ema" / "checkpoint-3.pt"))
    assert all(torch.equal(last[k], v) for k, v in state["ema"]["average"].items())
    assert "ema_decay 0.75: evaluations and checkpoints use the moving average" in (tmp_path / "ema/log.txt").read_text()


def test_ema_valid_log_scores_the_average_and_x_eval_agrees(reviews, tmp_path):
    config = write_config(tmp_path / "train.hjson", reviews, tmp_path / "run", max_epoch=1, **EMA)
    plain = write_config(tmp_path / "plain.hjson", reviews, tmp_path / "plain", max_epoch=1,
                         **{**EMA, "ema_decay": ...})
    assert train(config) == 0 and train(plain) == 0
    last = read_tsv(tmp_path / "run" / "valid.log.tsv")[-1]
    assert last["loss"] != read_tsv(tmp_path / "plain" / "valid.log.tsv")[-1]["loss"]
    eval_config = tmp_path / "eval.hjson"
    eval_config.write_text(json.dumps({"save_dir": str(tmp_path / "run"), "valid_subset": "dev",
                                       "checkpoint": str(tmp_path / "run" / "<last>"),
                                       "save_to_file": str(tmp_path / "scores.tsv")}))
    assert run_chain(["x-eval", str(eval_config)]) == 0
    [row] = read_tsv(tmp_path / "scores.tsv")
    assert (row["loss"], row["accuracy"]) == (last["loss"], last["accuracy"])


def test_ema_run_killed_mid_epoch_resumes_bitwise(reviews, tmp_path):
    reference = write_config(tmp_path / "reference.hjson", reviews, tmp_path / "reference", resume=True,
                             max_epoch=2, **EMA)
    assert run_runner(reference, "never", 0) == 0
    config = write_config(tmp_path / "train.hjson", reviews, tmp_path / "run", resume=True, max_epoch=2, **EMA)
    assert run_runner(config, "update", 17) == -signal.SIGKILL
    assert run_runner(config, "never", 0) == 0
    run, ref = tmp_path / "run", tmp_path / "reference"
    assert_same_weights(final_weights(run), final_weights(ref))
    assert_same_weights(load_torch(str(run / "state.pt"))["ema"]["average"],
                        load_torch(str(ref / "state.pt"))["ema"]["average"])
    assert (run / "valid.log.tsv").read_text() == (ref / "valid.log.tsv").read_text()
    names = sorted(p.name for p in ref.glob("checkpoint-*.pt"))
    assert names and sorted(p.name for p in run.glob("checkpoint-*.pt")) == names
    for name in names:
        assert_same_weights(load_torch(str(run / name)), load_torch(str(ref / name)))


@pytest.mark.parametrize("options", [{"ema_decay": 1.5}, {"ema_decay": 0.9, "use_bmuf": True}],
                         ids=["out-of-range", "with-bmuf"])
def test_ema_decay_out_of_range_or_with_bmuf_is_refused_before_any_work(reviews, tmp_path, options):
    config = write_config(tmp_path / "train.hjson", reviews, tmp_path / "run", **options)
    assert train(config) == 2
    assert not (tmp_path / "run").exists()


# ---- max_loss and min_steps ---------------------------------------------------------------------------------
def test_max_loss_stops_training_with_a_message(reviews, tmp_path):
    config = write_config(tmp_path / "train.hjson", reviews, tmp_path / "run", max_loss=0.01, viz=False)
    assert train(config) == 0
    log = (tmp_path / "run" / "log.txt").read_text()
    assert "at update 1 exceeds max_loss 0.01: stopping unstable training" in log
    assert "stopped: 1 updates" in log
    state = load_torch(str(tmp_path / "run" / "state.pt"))
    assert state["counters"]["num_updates"] == 1 and state["counters"]["finished"]
    assert [r["step"] for r in read_tsv(tmp_path / "run" / "valid.log.tsv")] == ["1"]


def test_min_steps_holds_early_stopping_back(reviews, tmp_path):
    # a learning rate too small to change the accuracy: no evaluation after the first is a new best
    frozen = {"learning_rate": 1e-12, "tolerance": 1, "eval_interval": 2, "viz": False}
    early = write_config(tmp_path / "early.hjson", reviews, tmp_path / "early", **frozen)
    held = write_config(tmp_path / "held.hjson", reviews, tmp_path / "held", min_steps=9, **frozen)
    assert train(early) == 0 and train(held) == 0
    assert [r["step"] for r in read_tsv(tmp_path / "early" / "valid.log.tsv")] == ["2", "4"]
    assert [r["step"] for r in read_tsv(tmp_path / "held" / "valid.log.tsv")] == ["2", "4", "6", "8", "10"]
    assert "stopped: 10 updates" in (tmp_path / "held" / "log.txt").read_text()


# ---- exclude_valid_from_train -------------------------------------------------------------------------------
def test_exclude_valid_from_train_leaves_the_valid_split_out(reviews, tmp_path, capsys):
    options = {"train_subset": "*", "max_update": 2, "viz": False}
    mixed = write_config(tmp_path / "mixed.hjson", reviews, tmp_path / "mixed", **options)
    apart = write_config(tmp_path / "apart.hjson", reviews, tmp_path / "apart", exclude_valid_from_train=True,
                         **options)
    # without the option the valid split is trained on (the default, as in the original), with a warning on
    # stderr and in log.txt that names the config file and key
    warning = (f"warning: {mixed}: key 'train_subset': '*' includes the valid split dev (valid_subset): this run "
               "trains on the data it is evaluated on; set exclude_valid_from_train: true to leave it out of "
               "training (cross-validation)")
    assert train(mixed) == 0
    assert [line for line in capsys.readouterr().err.splitlines() if "valid split" in line] == [warning]
    assert [line.split(" | ", 1)[1] for line in (tmp_path / "mixed" / "log.txt").read_text().splitlines()
            if "valid split" in line] == [warning]
    assert train(apart) == 0
    assert "includes the valid split" not in capsys.readouterr().err + (tmp_path / "apart" / "log.txt").read_text()
    assert load_torch(str(tmp_path / "mixed" / "state.pt"))["counters"]["splits"] == ["dev", "test", "train"]
    assert load_torch(str(tmp_path / "apart" / "state.pt"))["counters"]["splits"] == ["test", "train"]
    assert ("exclude_valid_from_train: left 1 valid split(s) ['dev'] (60 samples) out of the training splits "
            "['test', 'train']") in (tmp_path / "apart" / "log.txt").read_text()


def test_exclude_valid_from_train_with_only_the_valid_split_is_refused(reviews, tmp_path):
    config = write_config(tmp_path / "train.hjson", reviews, tmp_path / "run", train_subset="dev",
                          exclude_valid_from_train=True)
    assert train(config) == 2
    assert not (tmp_path / "run").exists()


# ---- keep_best_checkpoints ----------------------------------------------------------------------------------
def test_keep_best_checkpoints_keeps_the_k_best_and_the_last(reviews, tmp_path):
    config = write_config(tmp_path / "train.hjson", reviews, tmp_path / "run", keep_best_checkpoints=2,
                          eval_interval=4, major_metric="loss", ascending_metric=False, viz=False)
    assert train(config) == 0
    rows = read_tsv(tmp_path / "run" / "valid.log.tsv")
    assert len(rows) > 4
    ranked = sorted(rows, key=lambda r: (float(r["loss"]), int(r["step"])))
    expected = {f"checkpoint-{r['step']}.pt" for r in ranked[:2]} | {f"checkpoint-{rows[-1]['step']}.pt"}
    assert {p.name for p in (tmp_path / "run").glob("checkpoint-*.pt")} == expected
    index = json.loads((tmp_path / "run" / "checkpoints.json").read_text())
    assert index["best"] == f"checkpoint-{ranked[0]['step']}.pt"


def test_keep_best_checkpoints_with_save_best_only_is_refused(reviews, tmp_path):
    config = write_config(tmp_path / "train.hjson", reviews, tmp_path / "run", keep_best_checkpoints=2,
                          save_best_only=True)
    assert train(config) == 2


@pytest.mark.parametrize("ascending", [True, False])
def test_save_policy_ranks_by_score_and_survives_a_state_round_trip(ascending):
    from xdpx.train.policies import SavePolicy

    policy = SavePolicy(True, ascending=ascending, keep_best=2)
    scores = {10: 0.5, 20: 0.7, 30: 0.6, 40: 0.1}
    dropped = []
    for step, score in scores.items():
        dropped += policy.record(step, False, score)
    copy = SavePolicy(True, ascending=ascending, keep_best=2)
    copy.load_state_dict(policy.state_dict())
    dropped += copy.record(50, False, 0.55)
    if ascending:  # best: 20 (0.7), 30 (0.6); 50 is the last
        assert sorted(copy.saved) == [20, 30, 50] and sorted(dropped) == [10, 40]
    else:  # best: 40 (0.1), 10 (0.5)
        assert sorted(copy.saved) == [10, 40, 50] and sorted(dropped) == [20, 30]
