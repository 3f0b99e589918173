"""command_history.txt: one line per submission, appended in the folder x-submit runs from.

The original pai.sh kept the submitted command, the time and the job's log address there, at the
project root; we keep the same file and add the Slurm job id. Columns are tab-separated:
time (UTC), ``job ID``, ``log PATH``, the command as typed (shell-quoted; a credential in it masked).
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path

from xdpx.io.credentials import redact

HISTORY_FILE = "command_history.txt"


def append_history(folder: Path, argv: list[str], job_id: str, log_path: str) -> Path:
    """Append one submission to ``folder/command_history.txt`` and return the file's path."""
    path = folder / HISTORY_FILE
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    line = "\t".join([stamp, f"job {job_id}", f"log {log_path}", redact(shlex.join(argv))])
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
    return path
