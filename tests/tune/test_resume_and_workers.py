"""x-tune survives kill -9 (the same command again goes on with the study) and x-tune processes started
independently share one study through a real PostgreSQL server without running a trial twice."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest
from tune_helpers import load_study, trial_starts, tune, tune_process, write_study


def processes_running(fragment: str) -> list[int]:
    """PIDs whose command line contains ``fragment``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if fragment.encode() in f.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found


def wait_for(condition, timeout: float, what: str) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc to see the trial processes")
def test_kill_9_then_the_same_command_goes_on(reviews: Path, tmp_path: Path) -> None:
    path = write_study(tmp_path, reviews, parallel_runs=1, max_trials=2, heartbeat_interval=1,
                       base={"max_update": 40})
    save_dir = tmp_path / "study"
    process = tune_process(path)
    try:
        # trial 0 ran to the end; trial 1 is training
        wait_for(lambda: "| training cls_cnn" in _read(save_dir / "trial_1" / "log.txt"), 240, "trial 1 to train")
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    finally:
        if process.poll() is None:
            process.kill()
    # the trial's x-train died with its x-tune (no orphan keeps writing into trial_1)
    wait_for(lambda: not processes_running(str(save_dir / "configs" / "trial_1.hjson")), 10, "trial 1 to stop")
    before = load_study(save_dir).trials
    assert [t.state.name for t in before] == ["COMPLETE", "RUNNING"]

    assert tune(path) == 0
    trials = load_study(save_dir).trials
    assert [t.state.name for t in trials][:2] == ["COMPLETE", "FAIL"]
    assert trials[0].value == before[0].value  # the finished trial is kept, not run again
    retry = trials[2]
    assert retry.state.name in ("COMPLETE", "PRUNED") and retry.system_attrs["failed_trial"] == 1
    assert retry.params == before[1].params  # the interrupted trial runs again with its values
    assert len(trials) == 3
    assert trial_starts(save_dir) == {0: 1, 1: 1, 2: 1}
    results = (save_dir / "results.tsv").read_text()
    assert re.search(r"\n1\tfail\t.*interrupted: its x-tune process stopped \(no heartbeat\); run again as trial 2", results)


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def test_two_workers_share_one_postgresql_study(reviews: Path, tmp_path: Path, postgres_url: str) -> None:
    path = write_study(tmp_path, reviews, parallel_runs=1, max_trials=3, storage=postgres_url,
                       study_name="shared", min_ref=0)
    save_dir = tmp_path / "study"
    workers = [tune_process(path) for _ in range(2)]
    outputs = [w.communicate(timeout=400)[0] for w in workers]
    assert [w.returncode for w in workers] == [0, 0], outputs
    started = [set(map(int, re.findall(r"x-tune: trial (\d+) starts", out))) for out in outputs]
    assert started[0] and started[1] and not started[0] & started[1]  # both worked, never on the same trial

    import optuna

    trials = optuna.load_study(study_name="shared", storage=postgres_url).trials
    counted = [t for t in trials if not t.system_attrs.get("xdpx_over_budget")]
    assert len(trials) == 3  # trials are reserved under the storage's lock: none asked for over budget
    assert len(counted) == 3 and {t.state.name for t in counted} <= {"COMPLETE", "PRUNED"}
    assert started[0] | started[1] == {t.number for t in counted}
    assert trial_starts(save_dir) == {t.number: 1 for t in counted}  # no trial run twice
    assert len(set(map(str, (t.params for t in counted)))) == 3  # the workers did not draw the same values
    assert not (save_dir / "study.db").exists()  # the storage is the server
    rows = (save_dir / "results.tsv").read_text().strip().splitlines()
    assert len(rows) == 1 + len(trials)
