"""The run's logs: log.txt (timestamped lines), train.log.tsv, valid.log.tsv, and the progress display.

The tsv files are tables whose row count is part of the training state: a resumed run cuts them back
to the rows written before its saved state and writes the later rows again, so they read as if the run
had never stopped. Local files are appended line by line; remote ones are rewritten whole at each
``flush`` (an object store has no append).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from tqdm import tqdm

from xdpx import io
from xdpx.errors import UserError
from xdpx.io.credentials import redact
from xdpx.runtime.run_files import format_value


class TextLog:
    """A text file kept line by line; ``keep(n)`` cuts it back to its first n lines."""

    def __init__(self, path: str | None, enabled: bool = True) -> None:
        self.path = path if enabled else None
        self.lines: list[str] = []
        self._local = self.path is not None and not io.is_remote(self.path)
        self._dirty = False

    def load(self, keep: int | None = None) -> None:
        """Read the existing file (resume); keep its first ``keep`` lines (None: all) and rewrite it."""
        if self.path is None:
            return
        if io.exists(self.path):
            with io.open(self.path) as f:
                self.lines = f.read().splitlines()
        if keep is not None:
            self.lines = self.lines[:keep]
        self._rewrite()

    def append(self, line: str) -> None:
        self.lines.append(line)
        if self.path is None:
            return
        if self._local:
            with io.open(self.path, "a") as f:
                f.write(line + "\n")
        else:
            self._dirty = True

    def flush(self) -> None:
        if self._dirty:
            self._rewrite()

    def _rewrite(self) -> None:
        if self.path is not None:
            with io.open(self.path, "w") as f:
                f.write("".join(line + "\n" for line in self.lines))
        self._dirty = False


class TsvLog(TextLog):
    """A table with a header row. The first row written sets the columns; a later row with new keys
    (a user summary first added late) appends columns: the header is rewritten and earlier rows leave
    the new cells empty."""

    def __init__(self, path: str | None, enabled: bool = True) -> None:
        super().__init__(path, enabled)
        self.columns: list[str] | None = None

    def load(self, keep: int | None = None, columns: list[str] | None = None) -> None:
        """Read the file back (resume), keeping its first ``keep`` rows; ``columns`` (saved with the
        state) restores the header as it was when those rows were the last ones."""
        super().load(None if keep is None else keep + 1 if keep else 0)
        self.columns = self.lines[0].split("\t") if self.lines else None
        if columns and self.lines and columns != self.columns:
            self.columns = list(columns)
            width = len(self.columns)
            self.lines = ["\t".join(self.columns)] + ["\t".join((line.split("\t") + [""] * width)[:width])
                                                     for line in self.lines[1:]]
            self._rewrite()

    @property
    def rows(self) -> int:
        return max(0, len(self.lines) - 1)

    def write(self, row: dict[str, Any]) -> None:
        if self.columns is None:
            self.columns = list(row)
            self.append("\t".join(self.columns))
        else:
            added = [c for c in row if c not in self.columns]
            if added:  # pad the earlier rows so every line has one cell per column
                self.columns += added
                self.lines = ["\t".join(self.columns)] + [line + "\t" * len(added) for line in self.lines[1:]]
                self._rewrite()
        self.append("\t".join(format_value(row.get(c)) for c in self.columns))


class RunLog:
    """log.txt plus the console: ``info`` writes a timestamped line to both (rank 0 only)."""

    def __init__(self, path: str | None, enabled: bool = True) -> None:
        self.file = TextLog(path, enabled)
        self.enabled = enabled
        self.progress: Any = None

    def info(self, message: str, console: bool = True) -> None:
        if not self.enabled:
            return
        # a message may quote an option or a path: a credential in it never reaches log.txt or the console
        line = f"{time.strftime('%Y-%m-%d %H:%M:%S')} | {redact(message)}"
        self.file.append(line)
        if not console:
            return
        if self.progress is not None and self.progress.bar is not None:
            self.progress.write(line)
        else:
            print(line, flush=True)


class Progress:
    """A progress bar (step/total, loss, lr, samples/s, ETA) on a terminal; nothing otherwise (then the
    log lines of each log_interval show progress)."""

    def __init__(self, total: int, initial: int, enabled: bool) -> None:
        self.bar: Any = None
        if enabled and sys.stderr.isatty():
            self.bar = tqdm(total=total, initial=initial, unit="upd", dynamic_ncols=True, leave=True)

    def update(self, stats: dict[str, Any] | None = None) -> None:
        if self.bar is None:
            return
        self.bar.update(1)
        if stats:
            self.bar.set_postfix({k: format_value(v) for k, v in stats.items()}, refresh=False)

    def write(self, line: str) -> None:
        self.bar.write(line)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def summary_columns(values: dict[str, float], reserved: Any) -> dict[str, float]:
    """``values`` (user summaries), or a UserError when a name is one of the ``reserved`` columns."""
    clash = sorted(set(values) & set(reserved))
    if clash:
        raise UserError(f"summary name(s) {', '.join(clash)} are columns the trainer writes itself: "
                        "give log.add_summary / reduce_fn other names")
    return values


class Meter:
    """Sums of training statistics between two reports (a log row, an evaluation); saved in the state."""

    KEYS = ("loss", "sample_size", "nsamples", "updates", "grad_norm", "clipped", "seconds")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Every sum back to 0 (after its report)."""
        self.sums = dict.fromkeys(self.KEYS, 0.0)

    def add(self, **values: float) -> None:
        """Add ``values`` to the sums of their keys."""
        for key, value in values.items():
            self.sums[key] += value

    def mean_loss(self) -> float | None:
        """The loss per sample_size since the last reset (None: nothing counted)."""
        return self.sums["loss"] / self.sums["sample_size"] if self.sums["sample_size"] else None
