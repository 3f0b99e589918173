"""command_history.txt: one line per submission, appended in the folder x-submit runs from.

The original pai.sh kept the submitted command, the time and the job's log address there, at the
project root; we keep the same file and add the Slurm job id and the run folders the job writes, so that
``x-submit status|cancel|logs`` find a job by its id or by one of its run folders. Columns are
tab-separated: time (UTC), ``job ID``, ``log PATH`` (``NAME.ID_*.log`` for a job array: one log per
task), the command as typed (shell-quoted; a credential in it masked), ``runs DIR;DIR`` (absent when the
chain's outputs are not known at submission).
"""

from __future__ import annotations

import os
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from xdpx.io.credentials import redact

HISTORY_FILE = "command_history.txt"


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
    """The submissions recorded in one command_history.txt (lines of other forms are skipped)."""
    found = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        columns = line.split("\t")
        if len(columns) < 4 or not columns[1].startswith("job ") or not columns[2].startswith("log "):
            continue
        runs = columns[4][len("runs "):].split(";") if len(columns) > 4 and columns[4].startswith("runs ") else []
        found.append(Submission(columns[0], columns[1][4:], columns[2][4:], columns[3], runs, path))
    return found


def histories_for(target: str) -> list[Path]:
    """The command_history.txt files that may record ``target`` (a job id or a run folder): the current
    folder's, then those of the folders above a run folder (x-submit is run from the project root)."""
    candidates = [Path.cwd() / HISTORY_FILE]
    if not target.isdigit():
        folder = Path(os.path.abspath(target))
        candidates += [parent / HISTORY_FILE for parent in folder.parents]
    seen, found = set(), []
    for path in candidates:
        if path not in seen and path.is_file():
            seen.add(path)
            found.append(path)
    return found


def find_submission(target: str) -> Submission | None:
    """The latest submission of job ``target``, or of the job that writes the run folder ``target``."""
    wanted = os.path.normpath(os.path.abspath(target)) if not target.isdigit() else None
    for path in histories_for(target):
        for submission in reversed(read_history(path)):
            if submission.job_id == target or (wanted and any(
                    wanted == run or wanted.startswith(run + os.sep) for run in submission.runs)):
                return submission
    return None
