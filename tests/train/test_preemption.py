"""Preemption: SIGUSR1 / SIGTERM stop x-train after the current update (or the evaluation under way) with
the full state saved and exit code 3; the same command, run again, continues bit for bit. A signal while
x-train starts stops it too (exit 3); one in the last update lets the run finish (exit 0).

The signals come from the run itself (faulty_components: XDPX_TEST_SIGNAL), in the middle of a chosen
forward call, so the moments are exact. The runs here are in this process (the exit code is SystemExit's);
two real torchrun processes where one rank alone gets the signal: test_fsdp.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import torch
from train_helpers import FAULTY, REPO, assert_same_run, run_killable, train, write_config

from xdpx.errors import EXIT_REQUEUE
from xdpx.io.ownership import RUN_MARKER
from xdpx.models.checkpoints import load_torch

# the config has no resume: true, as a requeued Slurm job's often has not: the run marker decides
RUN = {"model": "faulty_cnn", "user_dir": str(FAULTY), "eval_interval": 7, "log_interval": 3,
       "save_best_only": True, "save_last_only": True, "tolerance": 4}


def counters(run: Path) -> dict:
    return load_torch(str(run / "state.pt"))["counters"]


def preempted_lines(run: Path) -> list[str]:
    return [line for line in (run / "log.txt").read_text().splitlines() if "preempted: SIG" in line]


def train_in_process(config: Path, monkeypatch, signal: str | None = None) -> int:
    """x-train in this process (the signal goes to this process; its handler is x-train's while it trains)."""
    if signal:
        monkeypatch.setenv("XDPX_TEST_SIGNAL", signal)
    else:
        monkeypatch.delenv("XDPX_TEST_SIGNAL", raising=False)
    try:
        return train(config)
    except SystemExit as stop:  # what ends the x-train process: its exit code
        return int(stop.code)


def test_signal_mid_update_and_mid_evaluation_then_the_same_command_continues_bitwise(reviews, tmp_path,
                                                                                      monkeypatch, capsys):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # every run alike: the thread count changes the last bits (test_resume.py)
    try:
        reference = tmp_path / "reference"
        assert train_in_process(write_config(tmp_path / "reference.hjson", reviews, reference, **RUN), monkeypatch) == 0
        config = write_config(tmp_path / "train.hjson", reviews, tmp_path / "run", **RUN)
        run = tmp_path / "run"
        capsys.readouterr()

        # SIGUSR1 in the forward of update 12: that update completes, the state is saved, the exit code is 3
        assert train_in_process(config, monkeypatch, "SIGUSR1:train:12") == EXIT_REQUEUE
        assert counters(run)["num_updates"] == 12 and not counters(run)["finished"]
        assert counters(run)["preempted_by"] == "SIGUSR1"
        assert [line for line in preempted_lines(run) if "stopped after update 12 " in line] == preempted_lines(run)
        out = capsys.readouterr().out
        assert f"run the same command again (the run marker makes it resume): x-train {config}" in out
        assert json.loads((run / RUN_MARKER).read_text())["preempted"]["update"] == 12
        assert not list(run.glob("checkpoint-12.pt"))  # no checkpoint the uninterrupted run would not make
        # on its way out the process ignores the signals: a second one (torchrun's SIGTERM to the slower
        # ranks) must not kill it before it exits with code 3
        assert signal.getsignal(signal.SIGUSR1) is signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGTERM)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)

        # the same command again, SIGTERM in the 2nd evaluation forward of this run (the evaluation at
        # update 14): the evaluation completes and is logged once, then the run stops
        assert train_in_process(config, monkeypatch, "SIGTERM:eval:2") == EXIT_REQUEUE
        assert "holds a run that SIGUSR1 stopped at update 12 (preemption): this run continues it" in \
            capsys.readouterr().out
        assert counters(run)["num_updates"] == 14 and counters(run)["preempted_by"] == "SIGTERM"
        steps = [row.split("\t")[1] for row in (run / "valid.log.tsv").read_text().splitlines()[1:]]
        assert steps == ["7", "14"]

        assert train_in_process(config, monkeypatch) == 0
    finally:
        torch.set_num_threads(threads)
        for sig in (signal.SIGUSR1, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
    assert_same_run(run, reference)  # weights, valid.log.tsv, train.log.tsv rows, checkpoints
    assert "preempted" not in json.loads((run / RUN_MARKER).read_text())
    assert counters(run)["finished"] and counters(run)["preempted_by"] is None


# 15 updates (one epoch), evaluated at 7 and 14, then the final evaluation at 15
END = {**RUN, "max_epoch": 1}


def marker(run: Path) -> dict:
    return json.loads((run / RUN_MARKER).read_text())


def test_signals_while_building_and_in_the_last_update_then_the_same_command_ends_bitwise(reviews, tmp_path,
                                                                                         monkeypatch, capsys):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGUSR1, signal.SIGTERM)}
    try:
        reference = tmp_path / "reference"
        assert train_in_process(write_config(tmp_path / "reference.hjson", reviews, reference, **END), monkeypatch) == 0
        config, run = write_config(tmp_path / "train.hjson", reviews, tmp_path / "run", **END), tmp_path / "run"

        # SIGTERM while the model is built (x-train's start-up): it stops before the first update, state saved
        assert train_in_process(config, monkeypatch, "SIGTERM:build:1") == EXIT_REQUEUE
        assert (counters(run)["num_updates"], counters(run)["preempted_by"]) == (0, "SIGTERM")
        assert marker(run)["preempted"]["update"] == 0
        summary = (run / "log.txt").read_text()
        assert "0 updates, 0 samples; no evaluation yet; training time" in summary and "None" not in summary
        for sig, handler in handlers.items():
            signal.signal(sig, handler)

        # the same command continues it; SIGUSR1 in the last update: the run has reached its end, it finishes
        # (the final evaluation, exit 0), and the marker and state.pt say so
        capsys.readouterr()
        assert train_in_process(config, monkeypatch, "SIGUSR1:train:15") == 0
        assert "holds a run that SIGTERM stopped at update 0 (preemption): this run continues it" in capsys.readouterr().out
        assert (counters(run)["num_updates"], counters(run)["finished"], counters(run)["preempted_by"]) == (15, True, None)
        assert "preempted" not in marker(run) and marker(run)["signal_at_end"]["signal"] == "SIGUSR1"
        assert ("SIGUSR1 received as the run reached its end: it is not stopped for a requeue but done, with its "
                "final state saved (exit code 0)") in (run / "log.txt").read_text()
        # the handlers of before are back (a chain's next step, e.g. x-eval, is not left ignoring SIGTERM)
        assert {sig: signal.getsignal(sig) for sig in handlers} == handlers

        # the same command again (a requeue by the scheduler itself): nothing to do, not "holds a run"
        assert train_in_process(config, monkeypatch) == 0
        assert f"{run} is finished (update 15); nothing to do" in capsys.readouterr().out
    finally:
        torch.set_num_threads(threads)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert_same_run(run, reference)


def test_killed_in_the_final_evaluation_after_a_signal_in_the_last_update_the_same_command_ends_it(
        reviews, tmp_path, monkeypatch, capsys):
    # the scheduler's kill once its grace time is over, in the final evaluation: the state of update 15 and
    # the marker were saved before it began, so the same command continues (it makes the final evaluation)
    config, run = write_config(tmp_path / "train.hjson", reviews, tmp_path / "run", **END), tmp_path / "run"
    monkeypatch.setenv("XDPX_TEST_SIGNAL", "SIGUSR1:train:15")
    assert run_killable(config, "eval", 9) == -signal.SIGKILL  # the 9th validation batch: the final evaluation's 1st
    assert (counters(run)["num_updates"], counters(run)["finished"], counters(run)["preempted_by"]) == (15, False, "SIGUSR1")
    assert marker(run)["preempted"]["update"] == 15
    assert train_in_process(config, monkeypatch) == 0
    assert "holds a run that SIGUSR1 stopped at update 15 (preemption): this run continues it" in capsys.readouterr().out
    assert [row.split("\t")[1] for row in (run / "valid.log.tsv").read_text().splitlines()[1:]] == ["7", "14", "15"]
    assert counters(run)["finished"] and "preempted" not in marker(run)


def test_a_sigterm_while_x_train_resolves_its_config_exits_3_before_writing_anything(reviews, tmp_path):
    # the user_dir signals the process as it is imported (the config is being resolved): the default action
    # of SIGTERM would end it with 143 (-15 here); SIGUSR1 takes the same path
    name = "SIGTERM"
    config = write_config(tmp_path / "train.hjson", reviews, tmp_path / "run", **END)
    env = {**os.environ, "XDPX_TEST_SIGNAL": f"{name}:import:1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "xdpx", "x-train", str(config)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == EXIT_REQUEUE, done.stdout[-2000:] + done.stderr[-2000:]
    assert (f"x-train: {name} received while starting, before anything was written to {tmp_path / 'run'}: exit "
            "code 3 (a job script of x-submit requeues the job); the same command run again starts (or continues) the run") in done.stdout
    assert not (tmp_path / "run").exists()
