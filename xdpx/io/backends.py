"""Thin wrappers over fsspec calls that need per-backend tuning, path-naming errors, or progress."""

from __future__ import annotations

import datetime as _dt
import math
from typing import Any

from .credentials import filesystem
from .errors import path_error, path_errors
from .paths import PathLike, to_str
from .progress import CHUNK_SIZE, fsspec_callback
from .retry import retrying

# Object stores cap a multipart upload at 10,000 parts; stay under it with room to spare.
_MAX_PARTS = 9000
_CONCURRENCY = 4  # parts in flight: memory stays under part size * _CONCURRENCY per transfer
# S3 rejects multipart parts under 5 MiB (EntityTooSmall; the last part excepted), so CHUNK_SIZE (4 MiB)
# cannot be the part size.
_MIN_PART = 8 * 2**20


def _protocols(fs: Any) -> tuple[str, ...]:
    proto = fs.protocol
    return (proto,) if isinstance(proto, str) else tuple(proto)


def is_object_store(fs: Any) -> bool:
    return any(p in ("s3", "s3a", "gs", "gcs", "oss") for p in _protocols(fs))


def is_s3(fs: Any) -> bool:
    return "s3" in _protocols(fs)


def transfer_kwargs(fs: Any, size: int | None) -> dict[str, Any]:
    """s3fs otherwise reads up to 100 MiB into memory for one put and downloads 50 MiB parts."""
    if "s3" not in _protocols(fs):
        return {}
    chunk = max(_MIN_PART, CHUNK_SIZE, math.ceil((size or 0) / _MAX_PARTS))
    return {"chunksize": chunk, "max_concurrency": _CONCURRENCY}


def read_kwargs(fs: Any) -> dict[str, Any]:
    """Object-store files default to 50 MiB read blocks; smaller blocks bound memory while streaming."""
    return {"block_size": CHUNK_SIZE} if is_object_store(fs) else {}


@retrying()
def info(path: PathLike) -> dict[str, Any]:
    """fsspec ``info()`` of a remote path; FileNotFoundError names the path as given."""
    url = to_str(path)
    fs, p = filesystem(url)
    with path_errors(url):
        return fs.info(p)


@retrying(path_arg=1)
def put_file(local: str, url: str, bar: Any, size: int | None = None) -> None:
    """Upload a local file in one put (multipart above a few chunks: still published atomically)."""
    fs, p = filesystem(url)
    if "memory" in _protocols(fs):
        _put_memory(fs, local, p, bar)
        return
    with path_errors(url):
        fs.put_file(local, p, callback=fsspec_callback(bar), **transfer_kwargs(fs, size))


def _put_memory(fs: Any, local: str, p: str, bar: Any) -> None:
    # fsspec's memory put_file publishes an empty file first and fills it in place, so readers could see
    # a partial file; one dict assignment of a complete file is atomic.
    # lazy: fsspec is heavy (~0.2 s); import xdpx and x-io --help start without it
    from fsspec.implementations.memory import MemoryFile

    with open(local, "rb") as f:
        data = f.read()
    parent = fs._parent(p)
    if parent and parent != p:
        fs.mkdirs(parent, exist_ok=True)
    fs.store[p] = MemoryFile(fs, p, data)
    bar.update(len(data))


@retrying()
def get_file(url: str, local: str, bar: Any, size: int | None = None) -> None:
    """Download to a local path, streaming."""
    fs, p = filesystem(url)
    with path_errors(url):
        fs.get_file(p, local, callback=fsspec_callback(bar), **transfer_kwargs(fs, size))


def to_epoch(value: Any) -> float | None:
    """Seconds since the epoch from what backends report (datetime, ISO or HTTP date string, number)."""
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:  # object stores report UTC
            value = value.replace(tzinfo=_dt.timezone.utc)
        return value.timestamp()
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return to_epoch(_dt.datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            pass
        import email.utils  # lazy: 12 ms, only for HTTP date headers

        try:
            return to_epoch(email.utils.parsedate_to_datetime(value))
        except (TypeError, ValueError):
            return None
    return None


_MTIME_KEYS = ("LastModified", "last_modified", "Last-Modified", "mtime", "updated", "modified", "created")


def modified_time(url: str, meta: dict[str, Any]) -> float:
    for key in _MTIME_KEYS:
        if key in meta:
            t = to_epoch(meta[key])
            if t is not None:
                return t
    raise path_error(OSError, url, "the backend reports no modification time")
