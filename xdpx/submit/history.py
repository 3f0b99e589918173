"""command_history.txt: one line per submission, appended in the folder x-submit runs from.

The original pai.sh kept the submitted command, the time and the job's log address there, at the
project root; we keep the same file and add the Slurm job id and the run folders the job writes, so that
``x-submit status|cancel|logs`` find a job by its id or by one of its run folders. Columns are
tab-separated: time (UTC), ``job ID``, ``log PATH`` (``NAME.ID_*.log`` for a job array: one log per
task), the command as typed (shell-quoted; a credential in it masked), ``runs DIR;DIR`` (absent when the
chain's outputs are not known at submission).

``status|cancel|logs`` read only the current folder's file, the one x-submit wrote there: never a file of
a folder above, which anyone sharing that folder could have planted to decide which job is cancelled. The
file must belong to the user running x-submit, and every job id in it must be a Slurm job id (digits,
as ``sbatch --parsable`` answered), or the file is refused with the file and line named.
"""

from __future__ import annotations

import os
import re
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from xdpx.errors import UserError
from xdpx.io.credentials import redact

HISTORY_FILE = "command_history.txt"
JOB_ID = re.compile(r"[0-9]+")  # what sbatch --parsable answers (slurm.submit): never a flag or a list


class HistoryError(UserError):
    """A command_history.txt that cannot be trusted to name a job: a config-like problem (exit 2)."""


@dataclass
class Submission:
    """One line of command_history.txt."""

    time: str
    job_id: str
    log_path: str
    command: str
    runs: list[str]
    history: Path


def append_history(folder: Path, argv: list[str], job_id: str, log_path: str,
                   outputs: list[str] | None = None) -> Path:
    """Append one submission to ``folder/command_history.txt`` and return the file's path."""
    path = folder / HISTORY_FILE
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    columns = [stamp, f"job {job_id}", f"log {log_path}", redact(shlex.join(argv))]
    if outputs:  # paths the job script could carry: no tab, no line break (request.script_safe)
        columns.append("runs " + ";".join(redact(o) for o in outputs))
    with open(path, "a", encoding="utf-8") as f:
        f.write("\t".join(columns) + "\n")
    return path


def read_history(path: Path) -> list[Submission]:
    """The submissions recorded in one command_history.txt (lines of other forms are skipped); a job id
    that is not a Slurm job id is a HistoryError naming the file and line."""
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        columns = line.split("\t")
        if len(columns) < 4 or not columns[1].startswith("job ") or not columns[2].startswith("log "):
            continue
        job_id = columns[1][4:]
        if not JOB_ID.fullmatch(job_id):
            raise HistoryError(f"{path}:{number}: job id {job_id[:40]!r} is not a Slurm job id (digits, as sbatch "
                               "answered): this line was not written by x-submit; remove it, or give the job id")
        runs = columns[4][len("runs "):].split(";") if len(columns) > 4 and columns[4].startswith("runs ") else []
        found.append(Submission(columns[0], job_id, columns[2][4:], columns[3], runs, path))
    return found


def own_history() -> Path | None:
    """The current folder's command_history.txt (where x-submit records its submissions), if any; refused
    when another user owns it."""
    path = Path.cwd() / HISTORY_FILE
    if not path.is_file():
        return None
    owner = path.stat().st_uid
    if hasattr(os, "getuid") and owner != os.getuid():
        raise HistoryError(f"{path}: belongs to user id {owner}, not to you ({os.getuid()}): x-submit follows only "
                           "jobs recorded by your own submissions; give the job id instead")
    return path


def find_submission(target: str) -> Submission | None:
    """The latest submission of job ``target``, or of the job that writes the run folder ``target``,
    recorded in the current folder's command_history.txt."""
    path = own_history()
    if path is None:
        return None
    wanted = os.path.normpath(os.path.abspath(target)) if not JOB_ID.fullmatch(target) else None
    for submission in reversed(read_history(path)):
        if submission.job_id == target or (wanted and any(
                wanted == run or wanted.startswith(run + os.sep) for run in submission.runs)):
            return submission
    return None
