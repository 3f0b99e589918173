"""Local copies of remote files, refreshed when the remote changes.

Each call makes one cheap metadata request (``info``: etag / last-modified / size) and downloads only when
that fingerprint differs from the one stored beside the cached copy. Entries live in
``$XDPX_CACHE`` (default ``~/.cache/xdpx/io``) under a hash of the URL and endpoint, keeping the file's
basename (some readers look at the extension). A per-entry file lock keeps concurrent processes from
mixing one version's bytes with another's fingerprint.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from . import paths
from .atomic import commit_local, local_temp_for
from .backends import get_file, info
from .credentials import storage_options
from .errors import path_error
from .paths import PathLike, is_remote, local_path, to_str
from .progress import make_bar

# Fields that change when an object's content changes, in the spellings of the various backends.
_FINGERPRINT_KEYS = (
    "ETag", "etag", "md5Hash", "Content-MD5", "LastModified", "Last-Modified", "last_modified",
    "mtime", "updated", "created", "size",
)  # fmt: skip

downloads = 0  # how many times cached_path fetched bytes in this process (tests and diagnostics)


def cache_dir() -> str:
    """The cache directory: ``$XDPX_CACHE`` or ``~/.cache/xdpx/io``."""
    return os.path.expanduser(os.environ.get("XDPX_CACHE") or os.path.join("~", ".cache", "xdpx", "io"))


def _fingerprint(meta: dict[str, Any]) -> dict[str, str]:
    return {k: str(meta[k]) for k in _FINGERPRINT_KEYS if meta.get(k) is not None}


@contextmanager
def _locked(lock_path: str) -> Iterator[None]:
    try:
        import fcntl  # lazy: fcntl is POSIX only; Windows goes without the lock
    except ImportError:  # Windows: no advisory locks; the atomic renames still prevent torn files
        yield
        return
    with builtins.open(lock_path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _read_meta(path: str) -> dict[str, Any] | None:
    try:
        with builtins.open(path, encoding="utf-8") as f:
            return json.load(f)  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return None


def cached_path(path: PathLike, progress: bool | None = None) -> str:
    """A local path with the content of ``path``.

    Local paths come back as they are (``file://`` removed, ``~`` expanded). A remote file is downloaded
    on first use and again whenever its etag / modification time / size changed since.
    """
    url = to_str(path)
    if not is_remote(url):
        return local_path(url)
    meta = info(url)
    if meta.get("type") == "directory":
        raise path_error(IsADirectoryError, url, "cached_path needs a file")
    fingerprint = _fingerprint(meta)
    # The endpoint is part of the key: the same bucket/key on two servers are different files.
    # Only a hash reaches the disk, so signed URLs or tokens in the path are not stored in clear.
    endpoint = str(storage_options(paths.protocol_of(url), url).get("endpoint_url", ""))
    key = hashlib.sha256(f"{endpoint}|{url}".encode()).hexdigest()[:32]
    entry = os.path.join(cache_dir(), key[:2], key)
    os.makedirs(entry, exist_ok=True)
    local = os.path.join(entry, paths.basename(url) or "file")
    meta_path = os.path.join(entry, ".fingerprint.json")
    with _locked(os.path.join(entry, ".lock")):
        if os.path.exists(local) and _read_meta(meta_path) == fingerprint:
            return local
        global downloads
        size = meta.get("size")
        tmp = local_temp_for(local)
        bar = make_bar(size, paths.basename(url), progress)
        try:
            get_file(url, tmp, bar, size)
            commit_local(tmp, local)
        finally:
            bar.close()
            if os.path.exists(tmp):
                os.unlink(tmp)
        downloads += 1
        meta_tmp = local_temp_for(meta_path)
        with builtins.open(meta_tmp, "w", encoding="utf-8") as f:
            json.dump(fingerprint, f)
        commit_local(meta_tmp, meta_path)
    return local
