"""Preemption: SIGUSR1 / SIGTERM stop x-train after the current update (or the evaluation under way) with
the full state saved and exit code 3; the same command, run again, continues bit for bit.

The signals come from the run itself (faulty_components: XDPX_TEST_SIGNAL), in the middle of a chosen
forward call, so the moments are exact. The runs here are in this process (the exit code is SystemExit's);
two real torchrun processes where one rank alone gets the signal: test_fsdp.py.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import torch
from train_helpers import FAULTY, assert_same_run, train, write_config

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
