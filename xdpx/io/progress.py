"""Byte progress bars for large transfers (tqdm, imported only when a bar is shown).

Whether a bar shows, first rule that applies:
1. a per-call ``progress=True/False`` argument (True shows a bar whatever the size or terminal);
2. ``set_progress(False)`` or env ``XDPX_QUIET=1`` hide all automatic bars;
3. ``set_progress(True)`` shows bars for large transfers even when stderr is not a terminal;
4. otherwise (automatic): the transfer is at least ``PROGRESS_THRESHOLD`` bytes and stderr is a terminal.
"""

from __future__ import annotations

import sys
from typing import Any

from xdpx.utils.step_progress import quiet

PROGRESS_THRESHOLD = 4 * 2**20  # bytes; smaller transfers are quick enough to need no bar
CHUNK_SIZE = 4 * 2**20  # streaming block: bounds memory per transfer whatever the file size

_enabled: bool | None = None


def set_progress(enabled: bool | None) -> None:
    """Globally enable (True), disable (False) or restore automatic (None) progress bars."""
    global _enabled
    _enabled = enabled


def _stderr_is_tty() -> bool:
    try:
        return bool(sys.stderr and sys.stderr.isatty())
    except (AttributeError, ValueError):  # replaced or closed stream
        return False


def should_show(size: int | None, progress: bool | None = None) -> bool:
    """Apply the rules above to a transfer of ``size`` bytes (None: unknown size)."""
    if progress is not None:
        return bool(progress)
    if _enabled is False or quiet():
        return False
    if size is None or size < PROGRESS_THRESHOLD:
        return False
    return _enabled is True or _stderr_is_tty()


class _NullBar:
    """Stands in for a bar when none is shown, so callers need no branches."""

    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> _NullBar:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def make_bar(size: int | None, desc: str, progress: bool | None = None) -> Any:
    """A tqdm bar in bytes on the current ``sys.stderr``, or a no-op bar when none should show."""
    if not should_show(size, progress):
        return _NullBar()
    from tqdm import tqdm  # lazy: tqdm (~70 ms): only when a bar shows; import xdpx starts without it

    if len(desc) > 40:
        desc = "..." + desc[-37:]
    return tqdm(
        total=size,
        desc=desc,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        file=sys.stderr,  # looked up now, so redirected/captured stderr gets the bar
        dynamic_ncols=True,
        leave=False,
    )


def fsspec_callback(bar: Any) -> Any:
    """An fsspec Callback that feeds byte counts of get_file/put_file into ``bar``.

    The bar's total is never changed here: copytree shares one bar over many files.
    """
    # lazy: fsspec is heavy (~0.2 s); import xdpx and x-io --help start without it
    from fsspec.callbacks import Callback

    class _BarCallback(Callback):
        def __init__(self) -> None:
            super().__init__()
            self._seen = 0

        def call(self, *args: Any, **kwargs: Any) -> None:
            if self.value > self._seen:
                bar.update(self.value - self._seen)
                self._seen = self.value

    return _BarCallback()
