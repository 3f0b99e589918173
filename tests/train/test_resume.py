"""Exact resume: SIGKILL at any point, then resume: true, ends bitwise equal to the uninterrupted run."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from train_helpers import assert_same_run, assert_same_weights, final_weights, train, write_config

from xdpx.models.checkpoints import load_torch, resolve_checkpoint

RUNNER = Path(__file__).resolve().parent / "kill_runner.py"
# every policy with state in play: early-stopping counter, best and last checkpoints, lr warmup and
# decay, dropout (step randomness), a partial log interval at each save
RESUME_CONFIG = {"resume": True, "save_best_only": True, "save_last_only": True, "tolerance": 4,
                 "eval_interval": 7, "log_interval": 3}


def run_runner(config: Path, where: str, n: int, env: dict[str, str] | None = None) -> int:
    return subprocess.run([sys.executable, str(RUNNER), str(config), where, str(n)], capture_output=True,
                          text=True, timeout=120, env=None if env is None else {**os.environ, **env}).returncode


@pytest.fixture(scope="module")
def reference(reviews: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("reference")
    config = write_config(root / "train.hjson", reviews, root / "run", **RESUME_CONFIG)
    assert run_runner(config, "never", 0) == 0
    return root / "run"


@pytest.mark.parametrize("where,n", [("update", 17), ("eval", 10), ("save", 5)],
                         ids=["mid-epoch", "during-eval", "during-checkpoint-write"])
def test_sigkill_then_resume_equals_uninterrupted_run(reviews, reference, tmp_path, where, n):
    config = write_config(tmp_path / "train.hjson", reviews, tmp_path / "run", **RESUME_CONFIG)
    assert run_runner(config, where, n) == -signal.SIGKILL
    assert not (tmp_path / "run" / "valid.log.tsv").read_text() == (reference / "valid.log.tsv").read_text()
    # an alias never names a half-written file: <last> loads with weights_only
    last = resolve_checkpoint(str(tmp_path / "run" / "<last>"))
    assert isinstance(load_torch(last), dict)
    assert run_runner(config, "never", 0) == 0
    assert_same_run(tmp_path / "run", reference)


def test_sigkill_at_random_times_then_resume(reviews, reference, tmp_path):
    config = write_config(tmp_path / "train.hjson", reviews, tmp_path / "run", **RESUME_CONFIG)
    rng = random.Random()
    delays = [rng.uniform(2.0, 4.5) for _ in range(2)]
    for delay in delays:
        process = subprocess.Popen([sys.executable, str(RUNNER), str(config), "never", "0"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert run_runner(config, "never", 0) == 0, f"delays {delays}"
    assert_same_run(tmp_path / "run", reference)


def test_train_steps_pauses_and_resume_continues_exactly(reviews, reference, tmp_path):
    save_dir = tmp_path / "run"
    staged = write_config(tmp_path / "stage1.hjson", reviews, save_dir, **RESUME_CONFIG, train_steps=12)
    # each stage in a fresh process, as x-train runs and as the reference ran (a test may have changed the
    # pytest process's torch thread count, and the thread count changes the last bits: see below)
    assert run_runner(staged, "never", 0) == 0
    state = load_torch(str(save_dir / "state.pt"))
    assert state["counters"]["num_updates"] == 12 and not state["counters"]["finished"]
    assert "paused at update 12" in (save_dir / "log.txt").read_text()
    assert run_runner(write_config(tmp_path / "stage2.hjson", reviews, save_dir, **RESUME_CONFIG), "never", 0) == 0
    assert_same_weights(final_weights(save_dir), final_weights(reference))
    assert (save_dir / "valid.log.tsv").read_text() == (reference / "valid.log.tsv").read_text()


def test_resume_on_another_cpu_thread_count_says_it_is_not_bitwise(reviews, tmp_path):
    save_dir = tmp_path / "run"
    staged = write_config(tmp_path / "stage1.hjson", reviews, save_dir, **RESUME_CONFIG, train_steps=12)
    assert run_runner(staged, "never", 0, env={"OMP_NUM_THREADS": "1"}) == 0
    assert load_torch(str(save_dir / "state.pt"))["counters"]["cpu_threads"] == 1
    resumed = write_config(tmp_path / "stage2.hjson", reviews, save_dir, **RESUME_CONFIG)
    assert run_runner(resumed, "never", 0, env={"OMP_NUM_THREADS": "2"}) == 0
    log = (save_dir / "log.txt").read_text()
    assert ("warning: resume: the run trained with 1 CPU threads, this process has 2: the result will match the "
            "uninterrupted run only to float rounding; set OMP_NUM_THREADS=1 for bit-for-bit") in log
    assert log.count("warning: resume") == 1


def test_resume_of_a_finished_run_does_nothing(reviews, tmp_path):
    config = write_config(tmp_path / "train.hjson", reviews, tmp_path / "run", resume=True, max_epoch=1)
    assert train(config) == 0
    before = final_weights(tmp_path / "run")
    assert train(config) == 0
    assert "is finished" in (tmp_path / "run" / "log.txt").read_text()
    assert_same_weights(final_weights(tmp_path / "run"), before)


def test_state_and_checkpoints_load_with_weights_only(reviews, tmp_path):
    config = write_config(tmp_path / "train.hjson", reviews, tmp_path / "run", max_epoch=1,
                          save_full_checkpoint=True)
    assert train(config) == 0
    run = tmp_path / "run"
    for path in [*run.glob("checkpoint-*.pt"), *run.glob("state*.pt")]:
        with open(path, "rb") as f:
            torch.load(f, weights_only=True)
    assert sorted(p.name for p in run.glob("state-*.pt")) == ["state-10.pt", "state-15.pt"]
