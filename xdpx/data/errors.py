"""The error a malformed input line raises: it names the file, the line number and an excerpt."""

from __future__ import annotations

from collections import Counter
from typing import Any

from xdpx.config.options import Option
from xdpx.config.ranges import in_range


class BadLine(ValueError):
    """A line that cannot become a sample. ``where`` is ``file:line`` once the reader knows it."""

    def __init__(self, reason: str, where: str = "", excerpt: str = "") -> None:
        self.reason, self.where, self.excerpt = reason, where, excerpt
        super().__init__(reason)

    def __reduce__(self) -> tuple[object, ...]:  # keep where/excerpt when sent back from a worker process
        return BadLine, (self.reason, self.where, self.excerpt)

    def located(self, where: str, raw: str | bytes) -> BadLine:
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8", errors="replace")
        return BadLine(self.reason, where, excerpt(raw))

    def __str__(self) -> str:
        text = f"{self.where}: {self.reason}" if self.where else self.reason
        return f"{text}\n    {self.excerpt!r}" if self.excerpt else text


def excerpt(text: str, width: int = 80) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def decode_utf8(raw: Any) -> Any:
    """A record as text: bytes are decoded as UTF-8, and bytes that are not UTF-8 are a :class:`BadLine`
    (the caller adds file:line); anything else (text, a table row's columns) is returned as it is."""
    if isinstance(raw, bytes):
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise BadLine(f"bytes that are not UTF-8 at position {e.start}") from None
    return raw


def count_skipped(error: BadLine, stats: Counter[str], examples: int = 3) -> None:
    """Count a bad line that ``skip_bad_lines`` skips; the first few are kept as examples for the log."""
    stats["bad_lines"] += 1
    if stats["bad_lines"] <= examples:
        stats[f"example: {error}"] += 1


MAX_BAD_FRACTION = Option(
    "max_bad_fraction", float, default=0.05, validate=in_range(0, 1, high_open=True),
    doc="with skip_bad_lines: stop with an error when more than this share of an input's lines (of a split for "
        "x-prepro) are bad, since such a file is most likely not in the configured format (a binary file, another "
        "delimiter, a wrong column layout); 0: no bad line at all")


def too_many_bad_lines(name: str, bad: int, lines: int, bound: float) -> str | None:
    """The error message when ``bad`` of ``lines`` exceed the bound ``max_bad_fraction``, else None."""
    if bad == 0 or bad <= bound * lines:
        return None
    return (f"{name}: {bad} of {lines} lines ({bad / max(lines, 1):.1%}) are bad, more than max_bad_fraction "
            f"{bound:g}: is the file in the configured format (parser, delimiter, columns)? Fix the data or the "
            "config, or raise max_bad_fraction if so many lines really are to be dropped")
