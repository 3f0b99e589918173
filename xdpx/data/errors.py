"""The error a malformed input line raises: it names the file, the line number and an excerpt."""

from __future__ import annotations

from typing import Any


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
