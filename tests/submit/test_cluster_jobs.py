"""x-submit's cluster features against the real one-node Slurm (slurm_cluster.py): a job sent SIGUSR1 mid-run
is requeued and ends equal to an uninterrupted run; a 4-run grid becomes an array of 4 tasks, at most 2 at
once, whose runs equal the local grid's; x-tune as 2 worker jobs on one PostgreSQL study; x-submit
status / cancel / logs by job id and by run folder; pass-through sbatch flags reach Slurm as given."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from submit_helpers import REPO, TINY, assert_same_run, job_id_from, submit, write_config

from xdpx.cli import x_script
from xdpx.submit.main import main as x_submit

SLOW_UPDATES = Path(__file__).resolve().parent / "slow_updates"


def grid_config(path: Path, data_dir: Path) -> Path:
    """4 runs (the first loop varies fastest), each in runs/lr<lr>.f<filters>."""
    base = {k: v for k, v in TINY.items() if k not in ("learning_rate", "num_filters")}
    loops = [[{"learning_rate": 1e-3}, {"learning_rate": 3e-3}], [{"num_filters": 4}, {"num_filters": 8}]]
    config = {"__parent__": ["${data_dir}/meta", *loops], "data_dir": str(data_dir),
              "save_dir": "runs/lr${learning_rate}.f${num_filters}", **base}
    path.write_text(json.dumps(config, indent=1))
    return path


def run_locally(folder: Path, *argv: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-m", "xdpx", *argv], cwd=folder, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout


def x_submit_job(folder: Path, monkeypatch: pytest.MonkeyPatch, capsys, *argv: str) -> tuple[int, str, str]:
    monkeypatch.chdir(folder)
    code = x_submit(list(argv), interactive=False)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def wait_for(condition, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.3)
    raise TimeoutError(what)


def array_tasks(slurm, job_id: str) -> list[dict[str, str]]:
    lines = slurm.command("scontrol", "show", "job", "-o", job_id).splitlines()
    return [dict(f.split("=", 1) for f in line.split() if "=" in f) for line in lines if line.strip()]


def most_at_once(intervals: list[tuple[int, int]]) -> int:
    """The most intervals open at one moment (one ending as another starts does not overlap)."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = peak = 0
    for _, change in events:
        running += change
        peak = max(peak, running)
    return peak


def epoch(stamp: str) -> int:
    return int(time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S")))


@pytest.mark.slow
def test_a_job_sent_sigusr1_mid_run_is_requeued_and_ends_equal_to_an_uninterrupted_run(
        slurm, reviews, local_run, tmp_path, monkeypatch, capsys):
    # the very config of the reference run (no resume: true): the requeued job runs the same line again
    # log_interval 1 (a log line per update; the validation log and the weights do not depend on it)
    write_config(tmp_path / "train.hjson", reviews, "runs/slurm", user_dir=str(SLOW_UPDATES), log_interval=1)
    monkeypatch.setenv("XDPX_TEST_UPDATE_SECONDS", "0.5")  # 8 updates: the signal lands in the middle
    assert submit(monkeypatch, tmp_path, "--procs-per-node", "2", "--cpus", "2", "x-train", "train.hjson") == 0
    job_id = job_id_from(capsys.readouterr().out)
    log_path = tmp_path / "slurm_jobs" / f"x-train.train.{job_id}.log"
    # mid-run: the job has logged its second update (of 8), whatever the load
    wait_for(lambda: log_path.exists() and "| update 2/8 |" in log_path.read_text(), 120,
             f"job {job_id} did not reach update 2: {log_path.read_text() if log_path.exists() else ''}{slurm.log()}")
    # what Slurm sends `signal_grace` seconds before the time limit (--signal=USR1@120), sent now
    slurm.command("scancel", "--signal=USR1", job_id)
    # Slurm holds a requeued job until its BeginTime, 2 minutes on: release it once its first start has ended
    # on the node. slurmd revokes the first start's credential when it ends it, and refuses every credential
    # of the job made in that second or before (its times are whole seconds): released earlier, the new start
    # finds its credential revoked and fails (seen under load). So: requeued, the node idle (the first start
    # ended, its credential revoked), then the clock past the second in which the node was seen idle.
    wait_for(lambda: (lambda s: (s.get("Restarts"), s.get("JobState"), s.get("Reason")))(slurm.job_state(job_id))
             == ("1", "PENDING", "BeginTime"), 120, f"job {job_id} was not requeued: {log_path.read_text()}")
    wait_for(lambda: slurm.node_state() == "IDLE", 120, f"the node did not end job {job_id}: {slurm.log()}")
    revoked_by = int(time.time())  # the revocation happened in this second or before
    wait_for(lambda: int(time.time()) > revoked_by, 5, "the clock did not move on")
    slurm.command("scontrol", "update", f"JobId={job_id}", "StartTime=now")
    state = slurm.wait(job_id)
    log = log_path.read_text()
    assert state["JobState"] == "COMPLETED" and state["Restarts"] == "1", f"{state}\n{log}\n{slurm.log()}"
    # one log holds both starts (--open-mode=append): stopped after an update, requeued, continued from it
    assert "stopped on a signal after saving its state (exit 3); requeueing the job" in log
    stopped = re.search(r"preempted: SIGUSR1 received; stopped after update (\d+)", log)
    assert stopped and 2 <= int(stopped.group(1)) < 8, log  # the signal landed mid-run
    assert log.count("x-submit: step 1/1: x-train train.hjson") == 2 and ", start 1" in log
    assert "(preemption): this run continues it" in log and "x-submit: all 1 step(s) finished" in log
    assert_same_run(tmp_path / "runs/slurm", local_run)
    assert not list((tmp_path / "slurm_jobs").glob("*.done"))


@pytest.mark.slow
def test_a_grid_runs_as_a_job_array_equal_to_the_local_grid(slurm, reviews, tmp_path, monkeypatch, capsys):
    local, cluster = tmp_path / "local", tmp_path / "cluster"
    for folder in (local, cluster):
        folder.mkdir()
        grid_config(folder / "grid.hjson", reviews)
    assert submit(monkeypatch, cluster, "--max-parallel", "2", "--cpus", "1", "x-train", "grid.hjson") == 0
    out = capsys.readouterr().out
    job_id = job_id_from(out)
    assert "an array of 4 task(s), at most 2 at once" in out
    run_locally(local, "x-train", "grid.hjson")  # meanwhile: the same 4 runs one after another, locally
    deadline = time.monotonic() + 180
    while any(t.get("JobState") in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")
              for t in array_tasks(slurm, job_id)):
        assert time.monotonic() < deadline, slurm.log()
        time.sleep(0.5)
    tasks = array_tasks(slurm, job_id)
    assert sorted(t["ArrayTaskId"] for t in tasks) == ["0", "1", "2", "3"]
    assert {t["JobState"] for t in tasks} == {"COMPLETED"}, slurm.log()
    assert {t["ArrayTaskThrottle"] for t in tasks} == {"2"}
    assert most_at_once([(epoch(t["StartTime"]), epoch(t["EndTime"])) for t in tasks]) <= 2
    for run in ("lr0.001.f4", "lr0.003.f4", "lr0.001.f8", "lr0.003.f8"):
        assert_same_run(cluster / "runs" / run, local / "runs" / run)
    tables = []
    for folder in (cluster, local):
        monkeypatch.chdir(folder)
        assert x_script(["aggregate_results", "runs"]) == 0
        tables.append(capsys.readouterr().out)
    assert tables[0] == tables[1] and len(tables[0].splitlines()) == 5  # header + the 4 runs, equal

    # status and logs, by job id and by a run folder (command_history.txt records the job's runs)
    code, status, _ = x_submit_job(cluster, monkeypatch, capsys, "status", job_id)
    assert code == 0
    rows = [line.split() for line in status.splitlines()]
    assert rows[0][:3] == ["JOB", "STATE", "EXIT"]
    assert sorted(r[:3] for r in rows[1:5]) == [[f"{job_id}_{i}", "COMPLETED", "0:0"] for i in range(4)]
    assert f"run      {cluster / 'runs/lr0.003.f8'}" in status
    code, by_folder, _ = x_submit_job(cluster, monkeypatch, capsys, "status", str(cluster / "runs/lr0.003.f8"))
    assert code == 0 and by_folder == status
    code, logs, _ = x_submit_job(cluster, monkeypatch, capsys, "logs", "runs/lr0.001.f4")
    assert code == 0
    for task in range(4):
        assert f"==> {cluster}/slurm_jobs/x-train.grid.{job_id}_{task}.log <==" in logs
        assert f"(array task {task} of job {job_id})" in logs
    assert logs.count("x-submit: all 1 step(s) finished") == 4


@pytest.mark.slow
def test_x_tune_as_two_worker_jobs_on_postgresql(slurm, reviews, postgres_url, tmp_path, monkeypatch, capsys):
    import optuna
    import psycopg

    database = f"tune_{os.getpid()}_{int(time.time())}"
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {database}")
    storage = postgres_url.rsplit("/", 1)[0] + "/" + database
    sys.path.insert(0, str(REPO / "tests" / "tune"))
    from tune_helpers import write_study

    write_study(tmp_path, reviews, storage=storage, parallel_runs=1, max_trials=4, base={"max_update": 8})
    assert submit(monkeypatch, tmp_path, "--workers", "2", "--cpus", "1", "x-tune", "tune.hjson") == 0
    out = capsys.readouterr().out
    job_id = job_id_from(out)
    assert "an array of 2 task(s)" in out
    deadline = time.monotonic() + 240
    while any(t.get("JobState") in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")
              for t in array_tasks(slurm, job_id)):
        assert time.monotonic() < deadline, slurm.log()
        time.sleep(0.5)
    logs = {t["ArrayTaskId"]: (tmp_path / "slurm_jobs" / f"x-tune.tune.{job_id}_{t['ArrayTaskId']}.log").read_text()
            for t in array_tasks(slurm, job_id)}
    assert {t["JobState"] for t in array_tasks(slurm, job_id)} == {"COMPLETED"}, logs
    trials = optuna.load_study(study_name="x-tune", storage=storage).trials
    assert len(trials) == 4 and {t.state.name for t in trials} <= {"COMPLETE", "PRUNED"}  # hyperband may prune
    assert any(t.state.name == "COMPLETE" for t in trials)  # min_ref 1: no pruning before one trial completed
    configs = [json.dumps(t.params, sort_keys=True) for t in trials]
    assert len(set(configs)) == 4  # no trial drawn twice
    started = sorted(int(n) for log in logs.values() for n in re.findall(r"trial (\d+) starts", log))
    assert started == [0, 1, 2, 3]  # each trial ran once, in one of the two workers
    rows = (tmp_path / "study" / "results.tsv").read_text().strip().splitlines()[1:]
    assert sorted(int(r.split("\t")[0]) for r in rows) == [0, 1, 2, 3]
    assert (tmp_path / "study" / "overview.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_status_and_cancel_of_a_pending_job_and_flags_passed_through(slurm, reviews, tmp_path, monkeypatch, capsys):
    marker = tmp_path / "injected"
    write_config(tmp_path / "train.hjson", reviews, "runs/a")
    comment = f"grid 1; $(touch {marker}) `touch {marker}`"
    assert submit(monkeypatch, tmp_path, "--sbatch=--begin=now+1hour", f"--sbatch=--comment={comment}",
                  "x-train", "train.hjson") == 0
    job_id = job_id_from(capsys.readouterr().out)
    state = slurm.job_state(job_id)
    assert (state["JobState"], state["Reason"]) == ("PENDING", "BeginTime")
    shown = slurm.command("scontrol", "show", "job", job_id)
    assert f"Comment={comment}" in shown and "Requeue=1" in shown
    code, status, _ = x_submit_job(tmp_path, monkeypatch, capsys, "status", "runs/a")
    assert code == 0 and status.splitlines()[1].split()[:2] == [job_id, "PENDING"] and "BeginTime" in status
    code, out, _ = x_submit_job(tmp_path, monkeypatch, capsys, "cancel", job_id)
    assert (code, out.strip()) == (0, f"x-submit: cancelled job {job_id} (now CANCELLED)")
    assert slurm.job_state(job_id)["JobState"] == "CANCELLED"
    code, _, err = x_submit_job(tmp_path, monkeypatch, capsys, "logs", job_id)
    assert code == 1 and f"job {job_id} has no log yet" in err
    code, _, err = x_submit_job(tmp_path, monkeypatch, capsys, "status", "runs/other")
    assert code == 1 and "no submission in command_history.txt" in err
    assert not marker.exists()
