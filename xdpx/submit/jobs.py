"""``x-submit status|cancel|logs JOB_ID|RUN_DIR``: follow a submitted job by its id or by a run folder it writes.

A run folder is looked up in the current folder's command_history.txt (history.py: never a file of a
folder above, which another user could plant), which records each submission's job id, log and run folders. Slurm is asked with
``scontrol show job`` (pending, running and recently ended jobs, array tasks one by one) and, for a job
the controller no longer holds, ``sacct`` (where the cluster keeps accounting); ``scancel`` cancels.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

from xdpx.errors import EXIT_CONFIG, EXIT_FAILED, UserError
from xdpx.submit.history import JOB_ID, HistoryError, Submission, find_submission
from xdpx.submit.slurm import INSTALL_HINT

JOB_COMMANDS = ("status", "cancel", "logs")
USAGE = "usage: x-submit status|cancel|logs JOB_ID|RUN_DIR"
_COLUMNS = ("JOB", "STATE", "EXIT", "RESTARTS", "ELAPSED", "NODES", "REASON")


def job_command(name: str, argv: list[str]) -> int:
    if len(argv) != 1 or argv[0].startswith("-"):
        print(f"x-submit: error: {name} takes one job id or run folder; {USAGE}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        job_id, submission = resolve_job(argv[0])
        if name == "status":
            print(status_table(job_id, submission), end="")
        elif name == "cancel":
            print(cancel(job_id))
        else:
            print(job_logs(job_id, submission), end="")
    except HistoryError as e:  # before Slurm is asked anything
        print(f"x-submit: error: {e}", file=sys.stderr)
        return EXIT_CONFIG
    except UserError as e:
        print(f"x-submit: error: {e}", file=sys.stderr)
        return EXIT_FAILED
    return 0


def resolve_job(target: str) -> tuple[str, Submission | None]:
    """The job id that ``target`` names (an id, or a run folder recorded in command_history.txt)."""
    if JOB_ID.fullmatch(target):
        try:
            return target, find_submission(target)
        except HistoryError:  # the id is the user's own word: a history not to be trusted only loses the log path
            return target, None
    submission = find_submission(target)
    if submission is None:
        raise UserError(f"no submission in command_history.txt of the current folder writes {target!r}: run "
                        "this from the folder you ran x-submit from, or give the job id (`squeue --me` lists "
                        "your jobs)")
    return submission.job_id, submission


def _slurm(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    path = shutil.which(tool)
    if path is None:
        raise UserError(f"{tool} is not on PATH: {INSTALL_HINT}")
    try:
        return subprocess.run([path, *args], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise UserError(f"{tool} did not answer within 60 s: check Slurm's controller with `scontrol ping`") from None


def job_records(job_id: str) -> list[dict[str, str]]:
    """One dict per job (per array task) as Slurm reports it; [] when it knows no such job any more."""
    shown = _slurm("scontrol", "show", "job", "-o", job_id)
    if shown.returncode == 0:
        return [dict(f.split("=", 1) for f in line.split() if "=" in f)
                for line in shown.stdout.splitlines() if line.strip()]
    accounted = _slurm("sacct", "-j", job_id, "-X", "-n", "-P",
                       "-o", "JobID,State,ExitCode,Elapsed,NodeList,Reason") if shutil.which("sacct") else None
    if accounted is None or accounted.returncode != 0:
        return []
    records = []
    for line in accounted.stdout.splitlines():
        cells = line.split("|")
        if len(cells) == 6:
            job, state, code, elapsed, nodes, reason = cells
            records.append({"JobId": job, "JobState": state, "ExitCode": code, "RunTime": elapsed,
                            "NodeList": nodes, "Reason": reason, "Restarts": "?"})
    return records


def _job_label(record: dict[str, str]) -> str:
    task = record.get("ArrayTaskId")
    if task and record.get("ArrayJobId"):
        return f"{record['ArrayJobId']}_{task if task.isdigit() else '[' + task + ']'}"
    return record.get("JobId", "?")


def status_table(job_id: str, submission: Submission | None) -> str:
    records = job_records(job_id)
    if not records:
        log = f"; its log: {submission.log_path}" if submission else ""
        raise UserError(f"Slurm knows no job {job_id} (it ended longer ago than the controller keeps jobs, "
                        f"MinJobAge, and the cluster keeps no accounting for sacct){log}")
    rows = [list(_COLUMNS)] + [
        [_job_label(r), r.get("JobState", "?"), r.get("ExitCode", "?"), r.get("Restarts", "?"), r.get("RunTime", "?"),
         r.get("NodeList", "?") if r.get("NodeList") not in (None, "(null)") else "-", r.get("Reason", "-")]
        for r in records]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    text = "".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() + "\n" for row in rows)
    if submission:
        text += f"log      {submission.log_path}\ncommand  {submission.command}\n"
        text += "".join(f"run      {run}\n" for run in submission.runs)
    return text


def cancel(job_id: str) -> str:
    result = _slurm("scancel", job_id)
    if result.returncode != 0:
        raise UserError(f"scancel {job_id} failed: {(result.stderr or result.stdout).strip()}")
    states = sorted({r.get("JobState", "?") for r in job_records(job_id)})
    return f"x-submit: cancelled job {job_id} (now {', '.join(states) or 'gone'})"


def log_files(job_id: str, submission: Submission | None) -> list[str]:
    """The job's log files: the ones command_history.txt names (one per array task), else Slurm's StdOut."""
    if submission:
        found = sorted(glob.glob(submission.log_path), key=_task_order)
        if found:
            return found
    return sorted({r["StdOut"] for r in job_records(job_id) if r.get("StdOut") and "%" not in r["StdOut"]},
                  key=_task_order)


def _task_order(path: str) -> tuple[int, str]:
    stem = path.rsplit(".", 1)[0]
    task = stem.rsplit("_", 1)[-1]
    return (int(task) if task.isdigit() else -1, path)


def job_logs(job_id: str, submission: Submission | None) -> str:
    files = [f for f in log_files(job_id, submission) if os.path.isfile(f)]
    if not files:
        where = submission.log_path if submission else "the job's StdOut (scontrol show job)"
        raise UserError(f"job {job_id} has no log yet ({where}): it writes one when it starts; "
                        f"`x-submit status {job_id}` says whether it is pending")
    parts = []
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        parts.append((f"==> {path} <==\n" if len(files) > 1 else "") + text)
    return "\n".join(parts)
