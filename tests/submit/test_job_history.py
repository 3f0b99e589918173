"""x-submit status|cancel|logs trust only the current folder's command_history.txt, and only Slurm job ids in
it: a file planted in a shared folder above a run cannot decide which job is cancelled. No Slurm needed: a
stand-in scancel on PATH records whether it was ever called."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from xdpx.submit.jobs import resolve_job
from xdpx.submit.main import main as x_submit


def line(job: str, run: Path) -> str:
    return f"2026-11-27 10:00:00 UTC\tjob {job}\tlog /tmp/x.{job}.log\tx-submit x-train t.hjson\truns {run}\n"


@pytest.fixture
def scancel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scancel (and scontrol) that only note their arguments; the marker file exists once either ran."""
    bin_dir, marker = tmp_path / "bin", tmp_path / "slurm_called"
    bin_dir.mkdir()
    for tool in ("scancel", "scontrol", "sacct"):
        (bin_dir / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> {marker}\n')
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return marker


def cancel(folder: Path, target: str, monkeypatch: pytest.MonkeyPatch, capsys) -> tuple[int, str]:
    monkeypatch.chdir(folder)
    code = x_submit(["cancel", target], interactive=False)
    return code, capsys.readouterr().err


def test_a_history_planted_in_a_folder_above_the_run_is_not_read(tmp_path, scancel, monkeypatch, capsys):
    shared, me = tmp_path / "shared", tmp_path / "shared" / "me"
    (me / "runs" / "a").mkdir(parents=True)
    (shared / "command_history.txt").write_text(line("4242", me / "runs" / "a"))
    code, err = cancel(me, "runs/a", monkeypatch, capsys)
    assert code == 1, err
    assert err.strip() == ("x-submit: error: no submission in command_history.txt of the current folder writes "
                           "'runs/a': run this from the folder you ran x-submit from, or give the job id "
                           "(`squeue --me` lists your jobs)")
    assert not scancel.exists()  # Slurm was never asked to cancel job 4242


@pytest.mark.parametrize("job", ["--me", "1,2", "12 13", "١٢"], ids=["flag", "list", "two", "arabic-digits"])
def test_a_job_id_that_is_not_a_slurm_id_refuses_the_file(job, tmp_path, scancel, monkeypatch, capsys):
    (tmp_path / "runs" / "a").mkdir(parents=True)
    history = tmp_path / "command_history.txt"
    history.write_text(line("7", tmp_path / "runs" / "b") + line(job, tmp_path / "runs" / "a"))
    before = history.read_bytes()
    code, err = cancel(tmp_path, "runs/a", monkeypatch, capsys)
    assert code == 2, err
    assert err.strip() == (f"x-submit: error: {history}:2: job id {job!r} is not a Slurm job id (digits, as "
                           "sbatch answered): this line was not written by x-submit; remove it, or give the job id")
    assert not scancel.exists() and history.read_bytes() == before
    assert resolve_job("7") == ("7", None)


def test_a_run_folder_names_the_job_that_writes_it(tmp_path, monkeypatch):
    (tmp_path / "runs" / "a").mkdir(parents=True)
    (tmp_path / "command_history.txt").write_text(line("7", tmp_path / "runs" / "a") + line("8", tmp_path / "runs" / "b"))
    monkeypatch.chdir(tmp_path)
    job_id, submission = resolve_job("runs/a/checkpoints")
    assert (job_id, submission.runs) == ("7", [str(tmp_path / "runs" / "a")])
    assert resolve_job("8")[0] == "8"


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="giving a file to another user needs root")
def test_a_history_of_another_user_is_refused(tmp_path, scancel, monkeypatch, capsys):
    (tmp_path / "runs" / "a").mkdir(parents=True)
    history = tmp_path / "command_history.txt"
    history.write_text(line("7", tmp_path / "runs" / "a"))
    os.chown(history, 4321, -1)
    code, err = cancel(tmp_path, "runs/a", monkeypatch, capsys)
    assert code == 2, err
    assert err.strip() == (f"x-submit: error: {history}: belongs to user id 4321, not to you (0): x-submit follows "
                           "only jobs recorded by your own submissions; give the job id instead")
    assert not scancel.exists()
    assert resolve_job("7") == ("7", None)  # a job id given is followed without the file's log path
