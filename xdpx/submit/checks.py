"""The checks of ``--dry``, run for each step of the job as that step will run in it.

Each config goes through the ordinary dispatcher with ``--dry`` (same resolution, same checks, same
messages), with WORLD_SIZE set to the processes of its step: the checks that depend on it (the
effective batch against the training set, ``${__workers__}``) see the job's size, not this machine's.

A step that reads what an earlier step of the chain writes (x-eval of the run that x-train makes,
x-train on the data_dir of x-prepro) cannot be checked before that output exists: when its only
complaint names such an output, it is left for the job (``--dry`` of a local chain stops there).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
from collections.abc import Iterator

from xdpx.chain import resolve_runs, run_chain
from xdpx.command import get_command
from xdpx.config import builtins
from xdpx.submit.request import JobRequest
from xdpx.submit.script import runs_on_every_node


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
    outputs: list[tuple[int, str]] = []  # (step number, output folder) of the steps that passed
    for number, (name, path) in enumerate(steps, start=1):
        processes = request.nodes * request.processes_per_node if runs_on_every_node(name) else 1
        messages = io.StringIO()
        with world_size_of_job(processes), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(messages):
            passed = run_chain([name, path, "--dry"]) == 0
            if passed:
                outputs += [(number, out) for out in _outputs(name, path)]
        if passed:
            continue
        earlier = [(n, out) for n, out in outputs if _names_path(messages.getvalue(), out)]
        if earlier:
            n, out = earlier[0]
            print(f"x-submit: note: step {number} ({name} {path}) reads {out!r}, which step {n} writes: "
                  "it is checked when the job reaches it", file=sys.stderr)
            continue
        sys.stderr.write(messages.getvalue())
        failed += 1
    return failed


def _outputs(name: str, path: str) -> list[str]:
    key = get_command(name).output_key
    return [args.get(key) for args in resolve_runs(name, path) if key and args.get(key)]


def _names_path(message: str, path: str) -> bool:
    """Whether a message quotes ``path`` or a path inside it (errors quote paths with repr)."""
    candidates = {path.rstrip("/"), os.path.abspath(path)}
    return any(re.search("'" + re.escape(p) + r"(/[^']*)?'", message) for p in candidates)
