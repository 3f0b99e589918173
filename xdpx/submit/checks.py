"""The checks of ``--dry``, run for each step of the job as that step will run in it.

Each config goes through the ordinary dispatcher with ``--dry`` (same resolution, same checks, same
messages), with WORLD_SIZE set to the processes of its step: the checks that depend on it (the
effective batch against the training set, ``${__workers__}``) see the job's size, not this machine's.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator

from xdpx.cli import run_chain
from xdpx.config import builtins
from xdpx.submit.request import JobRequest
from xdpx.submit.script import DISTRIBUTED_COMMANDS


@contextlib.contextmanager
def world_size_of_job(world_size: int) -> Iterator[None]:
    previous = os.environ.get("WORLD_SIZE")
    os.environ["WORLD_SIZE"] = str(world_size)
    builtins._cache.pop("__workers__", None)  # computed once per process otherwise
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("WORLD_SIZE", None)
        else:
            os.environ["WORLD_SIZE"] = previous
        builtins._cache.pop("__workers__", None)


def check_steps(steps: list[tuple[str, str]], request: JobRequest) -> int:
    """Check every step (all of them, so that every problem shows at once); the number that fail.

    Problems go to stderr as ``--dry`` prints them; the resolved options it prints are not shown.
    """
    failed = 0
    for name, path in steps:
        processes = request.nodes * request.processes_per_node if name in DISTRIBUTED_COMMANDS else 1
        with world_size_of_job(processes), contextlib.redirect_stdout(io.StringIO()):
            failed += run_chain([name, path, "--dry"]) != 0
    return failed
