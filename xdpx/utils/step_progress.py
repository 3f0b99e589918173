"""Progress of the long steps outside training: x-pred and x-eval batches, x-script build_index, merge_lora.

x-train shows its own progress (a bar on a terminal, a log line every log_interval); a step that scores
thousands of samples on a CPU can take minutes, and a silent minute looks like a hang. What shows, first
rule that applies:

1. nothing when env ``XDPX_QUIET`` is set (as for the byte bars of xdpx.io.progress), or for a step of
   one unit;
2. on a terminal (stderr is a tty): a tqdm bar that disappears when the step ends;
3. otherwise (a log file, a Slurm job, a pipe): one line on stderr every ``XDPX_PROGRESS_SECONDS``
   (default 30) with the count, the rate and the time left; a step that ends sooner prints nothing.

Lines go to stderr so that a command's own output on stdout (predictions, tables) stays clean.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

DEFAULT_SECONDS = 30.0  # between two lines when stderr is not a terminal


def quiet() -> bool:
    """Whether env ``XDPX_QUIET`` asks for no progress at all (the byte bars of xdpx.io.progress read it too)."""
    return os.environ.get("XDPX_QUIET", "").strip() not in ("", "0", "false")


def _line_seconds() -> float:
    value = os.environ.get("XDPX_PROGRESS_SECONDS", "").strip()
    try:
        return max(float(value), 0.0) if value else DEFAULT_SECONDS
    except ValueError:  # a typo in a tuning knob should not stop a prediction: the default applies
        return DEFAULT_SECONDS


def _is_tty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class StepProgress:
    """Counts the units of a step (``update``) and shows them by the rules above; a context manager."""

    def __init__(self, total: int, desc: str, unit: str = "batch", enabled: bool = True,
                 stream: TextIO | None = None) -> None:
        self.total, self.desc, self.unit = total, desc, unit
        self.stream = stream if stream is not None else sys.stderr  # looked up now: captured stderr works
        self.done = 0
        self.started = self.last_line = time.monotonic()
        self.interval = _line_seconds()
        self.bar: Any = None
        self.active = enabled and total > 1 and not quiet()
        if self.active and _is_tty(self.stream):
            from tqdm import tqdm  # lazy: tqdm (~70 ms): only when a bar shows; import xdpx starts without it

            self.bar = tqdm(total=total, desc=desc, unit=unit, file=self.stream, dynamic_ncols=True, leave=False)

    def update(self, n: int = 1) -> None:
        """``n`` more units done."""
        self.done += n
        if not self.active:
            return
        if self.bar is not None:
            self.bar.update(n)
            return
        now = time.monotonic()
        if now - self.last_line >= self.interval and self.done < self.total:
            self.last_line = now
            self.stream.write(self.line(now) + "\n")
            self.stream.flush()

    def line(self, now: float) -> str:
        """``desc: 120/400 batches (30%), 4.1 batches/s, about 1m08s left``."""
        elapsed = max(now - self.started, 1e-9)
        rate = self.done / elapsed
        left = (self.total - self.done) / rate if rate > 0 else float("inf")
        units = self.unit + ("es" if self.unit.endswith(("ch", "sh", "s", "x")) else "s")
        eta = _duration(left) if left != float("inf") else "?"
        return (f"{self.desc}: {self.done}/{self.total} {units} ({100 * self.done // self.total}%), "
                f"{rate:.1f} {units}/s, about {eta} left")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self) -> StepProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Phases:
    """A line on stderr as each phase of a multi-phase tool starts (``merge_lora: merging the adapters``),
    with the seconds the previous phases took, unless ``XDPX_QUIET`` is set."""

    def __init__(self, tool: str, stream: TextIO | None = None) -> None:
        self.tool = tool
        self.stream = stream if stream is not None else sys.stderr
        self.started = time.monotonic()

    def start(self, phase: str) -> None:
        if quiet():
            return
        self.stream.write(f"{self.tool} [{_duration(time.monotonic() - self.started)}]: {phase}\n")
        self.stream.flush()


@contextmanager
def without_library_bars() -> Iterator[None]:
    """transformers' own bars ("Loading weights", "Writing model shards") off while a model loads or saves:
    in log.txt or a Slurm log each refresh of a bar is a line of noise; our own lines say what was loaded."""
    # lazy: optional package transformers; only callers that loaded it use this, x-prepro must not pay for it
    from transformers.utils import logging as transformers_logging

    was_on = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            transformers_logging.enable_progress_bar()
