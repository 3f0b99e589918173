"""Streaming the input files of a split as chunks of raw records (bounded memory), with the content
hash that goes into the fingerprint, and the ordered, bounded parallel map over worker processes."""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

from xdpx import io
from xdpx.data.errors import BadLine
from xdpx.data.loading import Layout

CHUNK_LINES = 4096
BLOCK_BYTES = 1 << 20
MAX_LINE_BYTES = 64 << 20  # longer is not a line of text: such a file is refused rather than read whole
UNKNOWN_LAYOUT = Layout(labelled=False)  # no record of the file parses: each one is reported as bad


class HashingReader:
    """A binary file wrapper that hashes every byte read (lines or whole reads). Lines are cut from
    blocks, so a file without line ends (binary, compressed) stops at ``file:line`` once a line passes
    MAX_LINE_BYTES instead of being read whole into memory."""

    def __init__(self, f: IO[bytes], digest: Any, path: str = "") -> None:
        self.f, self.digest, self.path = f, digest, path

    def __iter__(self) -> Iterator[bytes]:
        partial: list[bytes] = []  # the start of a line that has not ended yet
        partial_size = number = 0
        while block := self.f.read(BLOCK_BYTES):
            self.digest.update(block)
            pieces = block.split(b"\n")
            for piece in pieces[:-1]:
                number += 1
                if partial:
                    self._check(partial_size + len(piece), number)
                    piece, partial, partial_size = b"".join([*partial, piece]), [], 0
                yield piece + b"\n"
            if pieces[-1]:
                partial.append(pieces[-1])
                partial_size += len(pieces[-1])
                self._check(partial_size, number + 1)
        if partial:
            yield b"".join(partial)

    def _check(self, size: int, number: int) -> None:
        if size > MAX_LINE_BYTES:
            raise BadLine(f"a line longer than {MAX_LINE_BYTES >> 20} MiB: is this a text file in the configured "
                          "format?", where=f"{self.path}:{number}")

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(n)
        self.digest.update(data)
        return data


def first_columns(parser: Any, record: Any) -> list[str] | None:
    """The columns of a record, or None when it cannot be parsed (the worker will report it)."""
    try:
        text = record.decode("utf-8") if isinstance(record, bytes) else record
        return parser.parse(text)
    except Exception:  # a bad first line: the worker names it with file:line
        return None


@contextmanager
def open_records(parser: Any, path: str, digest: Any) -> Iterator[Iterator[tuple[int, Any]]]:
    """The (number, raw record) pairs of one file. A table parser (xdpx/data/tables.py) opens the path
    itself (a Parquet file, a workbook, a datasets folder); the others read a byte stream, hashed as read."""
    if getattr(parser, "reads_paths", False):
        yield parser.path_records(path, digest)
        return
    with io.open(path, "rb") as f:
        yield parser.records(HashingReader(f, digest, path), path)


def file_records(path: str, parser: Any, start_line: int, digest: Any) -> Iterator[tuple[int, Any]]:
    """The records of one file after the first ``start_line``, without a UTF-8 byte order mark."""
    with open_records(parser, path, digest) as records:
        for number, raw in records:
            if number <= start_line:
                continue
            if number == 1 and isinstance(raw, bytes) and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]  # a UTF-8 byte order mark
            yield number, raw


def _split_records(files: list[str], parser: Any, loader: Any, start_line: int, digest: Any,
                   counts: dict[str, int]) -> Iterator[tuple[str, int, Any]]:
    """(file, number, raw) of a split: its files one after the other, or mixed (loader corpus_mix)."""
    if getattr(loader, "mixes", None) is not None and loader.mixes(files):
        for path in files:
            digest.update(io.basename(path).encode() + b"\0")
        yield from loader.mixed_records(files, parser, start_line, digest, counts)
        return
    for path in files:
        digest.update(io.basename(path).encode() + b"\0")
        for number, raw in file_records(path, parser, start_line, digest):
            yield path, number, raw


def iter_chunks(files: list[str], parser: Any, loader: Any, start_line: int, remove_duplicate: bool,
                digest: Any, counts: dict[str, int]) -> Iterator[tuple[str, Layout, list[tuple[int, Any]]]]:
    """(file, layout, records) chunks of the split's files in order; duplicates dropped here. The layout
    (labelled or not, number of columns) is that of the file's first record that parses. A chunk holds
    records of one file: a mixed split changes file often, and a chunk ends there."""
    seen: set[int] = set()
    layouts: dict[str, Layout] = {}
    chunk: list[tuple[int, Any]] = []
    chunk_path = ""
    for path, number, raw in _split_records(files, parser, loader, start_line, digest, counts):
        if chunk and (path != chunk_path or len(chunk) >= CHUNK_LINES):
            yield chunk_path, layouts.get(chunk_path) or UNKNOWN_LAYOUT, chunk
            chunk = []
        chunk_path = path
        counts["lines"] += 1
        if path not in layouts and raw:
            columns = first_columns(parser, raw)
            if columns is not None:
                layouts[path] = loader.layout_of(columns, number)
        if remove_duplicate and raw:
            key = hash(raw if isinstance(raw, bytes) else repr(raw))
            if key in seen:
                counts["duplicates"] += 1
                continue
            seen.add(key)
        chunk.append((number, raw))
    if chunk:
        yield chunk_path, layouts.get(chunk_path) or UNKNOWN_LAYOUT, chunk


class WorkerPool:
    """Runs jobs in order: in this process (workers <= 1) or in ``workers`` processes started once
    for the whole run, with at most 2 x workers chunks in flight, so memory stays bounded."""

    def __init__(self, workers: int, initializer: Callable[..., None], initargs: tuple[Any, ...]) -> None:
        self.workers, self.initializer, self.initargs = workers, initializer, initargs
        self.pool: Any = None

    def __enter__(self) -> WorkerPool:
        if self.workers <= 1:
            self.initializer(*self.initargs, True)
        else:
            # lazy: multiprocessing only for workers > 1; x-prepro --dry starts without it
            import multiprocessing

            # spawn, not fork: a forked copy of a process whose tokenizer threads already ran can deadlock.
            context = multiprocessing.get_context("spawn")
            self.pool = context.Pool(self.workers, self.initializer, (*self.initargs, False))
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            if exc[0] is None:
                self.pool.close()
            else:
                self.pool.terminate()
            self.pool.join()

    def map(self, job_fn: Callable[[Any], Any], jobs: Iterator[Any]) -> Iterator[Any]:
        if self.pool is None:
            for job in jobs:
                yield job_fn(job)
            return
        pending: deque[Any] = deque()
        for job in jobs:
            pending.append(self.pool.apply_async(job_fn, (job,)))
            if len(pending) >= 2 * self.workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()


def new_digest() -> Any:
    return hashlib.sha1(usedforsecurity=False)


class _NoDigest:
    """The digest of a reader that fingerprints nothing (x-pred, x-eval): updates are dropped, and a parser
    that would read a whole file only to hash it (tables.hash_file) skips that read."""

    def update(self, data: bytes) -> None:
        pass


NO_DIGEST = _NoDigest()
