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
from pathlib import Path

from xdpx import io as xio
from xdpx.chain import resolve_runs, run_chain
from xdpx.command import get_command
from xdpx.config import builtins
from xdpx.config.errors import ConfigError
from xdpx.config.loader import load_config
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


def check_layout(steps: list[tuple[str, str]], request: JobRequest) -> list[int]:
    """How many runs each step's config describes, once the job's shape is known to fit them: looped
    configs become a job array (every looped step with the same number of runs, no step of one run beside
    them: each task would repeat it), x-tune workers share a storage every node reaches. A ConfigError
    says what to change."""
    runs = [_run_count(path) for _, path in steps]
    names = [name for name, _ in steps]
    looped = [(number, name, path, count) for number, ((name, path), count) in enumerate(zip(steps, runs), 1)
              if count > 1]
    if "x-tune" in names:
        _check_tune(steps, runs, request)
    elif request.workers > 1:
        raise ConfigError(f"x-submit: --workers {request.workers} starts x-tune workers, and the chain has no x-tune "
                          "step: a config with loops runs as a job array by itself (--max-parallel bounds it)")
    if looped:
        counts = {count for *_, count in looped}
        if len(counts) > 1:
            shown = ", ".join(f"step {n} ({name} {path}): {count}" for n, name, path, count in looped)
            raise ConfigError(f"x-submit: a job array runs run i of every looped config in task i, but the configs "
                              f"describe different numbers of runs ({shown}): submit them separately")
        single = [(n, name, path) for n, ((name, path), count) in enumerate(zip(steps, runs), 1) if count == 1]
        if single:
            n, name, path = single[0]
            raise ConfigError(f"x-submit: step {n} ({name} {path}) is one run, beside configs with {counts.pop()} "
                              "runs that become a job array: every task would run it again; submit it separately "
                              "(before the array, e.g. x-prepro; after it, e.g. x-script aggregate_results)")
    elif request.max_parallel and request.workers <= 1:
        raise ConfigError(f"x-submit: --max-parallel {request.max_parallel} bounds the tasks of a job array, and no "
                          "config of the chain has loops (one array task per run of a grid or cross-validation)")
    return runs


def _check_tune(steps: list[tuple[str, str]], runs: list[int], request: JobRequest) -> None:
    from xdpx.tune.study import storage_url  # lazy: only for x-tune steps; x-submit --help skips xdpx.tune

    if request.nodes > 1:
        raise ConfigError(f"x-submit: x-tune trains its trials on one node; --nodes {request.nodes} would leave the "
                          f"others idle: use --workers {request.nodes} (that many x-tune jobs of one node each, "
                          "sharing the study through a PostgreSQL storage)")
    if request.workers <= 1:
        return
    if len(steps) > 1 or runs[0] > 1:
        raise ConfigError(f"x-submit: --workers {request.workers} runs x-tune {request.workers} times on one study: "
                          "it must be the only step of the chain, with one study (no loop in its config)")
    path = steps[0][1]
    args = resolve_runs("x-tune", path)[0]
    url = storage_url(args.storage, args.save_dir)
    if url.startswith("sqlite"):
        source = args.source("storage") if args.source("storage") != "(default)" else path
        raise ConfigError(
            f"{source}: key 'storage': --workers {request.workers} runs x-tune on up to "
            f"{request.workers} machines, but the study's storage is SQLite ({url}): SQLite is one file that a "
            "single machine may write; its locks do not hold across machines on a shared file system, so "
            "workers would corrupt the study or run the same trial twice. Set storage: "
            "postgresql://USER@HOST:5432/DATABASE (a PostgreSQL server every node reaches; docs/tune.md)")


def step_outputs(steps: list[tuple[str, str]], workdir: Path) -> list[str]:
    """The output folders of every run of the chain (absolute, or remote URLs): command_history.txt records
    them, so ``x-submit status RUN_DIR`` finds the job. A step whose config cannot be resolved yet (it reads
    an earlier step's output) adds none."""
    found: list[str] = []
    for name, path in steps:
        try:
            outputs = _outputs(name, path)
        except ConfigError:
            continue
        found += [out if xio.is_remote(out) else os.path.normpath(workdir / out) for out in outputs]
    return found


def _run_count(path: str) -> int:
    try:
        return len(load_config(path))
    except ConfigError:
        return 1  # the --dry checks reported it, or the step reads an earlier step's output
