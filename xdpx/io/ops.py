"""Queries and tree operations on local and remote paths (copy/move live in transfer.py)."""

from __future__ import annotations

import glob as _glob
import hashlib
import os
import posixpath
import shutil
import uuid
from typing import Any

from . import paths
from .atomic import local_temp_for
from .backends import info, is_s3, modified_time
from .credentials import filesystem
from .errors import path_error, path_errors
from .paths import PathLike, check_writable_scheme, is_remote, local_path, split_protocol, to_str
from .progress import CHUNK_SIZE, make_bar
from .retry import retrying
from .streams import open as _open


@retrying()
def exists(path: PathLike) -> bool:
    """True if a file or directory (or, remotely, a non-empty prefix or bucket) exists at ``path``."""
    url = to_str(path)
    if not is_remote(url):
        return os.path.exists(local_path(url))
    fs, p = filesystem(url)
    return bool(fs.exists(p))


@retrying()
def isdir(path: PathLike) -> bool:
    """True if ``path`` is a directory (remotely: a bucket or a prefix with objects under it)."""
    url = to_str(path)
    if not is_remote(url):
        return os.path.isdir(local_path(url))
    fs, p = filesystem(url)
    return bool(fs.isdir(p))


@retrying()
def isfile(path: PathLike) -> bool:
    """True if ``path`` is a file (remotely: an object)."""
    url = to_str(path)
    if not is_remote(url):
        return os.path.isfile(local_path(url))
    fs, p = filesystem(url)
    return bool(fs.isfile(p))


@retrying()
def stat(path: PathLike) -> dict[str, Any]:
    """``{'type': 'file'|'directory', 'size': int|None, ...backend fields}``; FileNotFoundError if missing."""
    url = to_str(path)
    if not is_remote(url):
        with path_errors(url):
            st = os.stat(local_path(url))
        kind = "directory" if os.path.isdir(local_path(url)) else "file"
        return {"type": kind, "size": st.st_size, "mtime": st.st_mtime}
    meta = dict(info(url))
    meta["type"] = "directory" if meta.get("type") == "directory" else "file"
    return meta


@retrying()
def listdir(path: PathLike) -> list[str]:
    """Names (not paths) of the entries of a directory, sorted."""
    url = to_str(path)
    if not is_remote(url):
        with path_errors(url):
            return sorted(os.listdir(local_path(url)))
    fs, p = filesystem(url)
    with path_errors(url):
        entries = fs.ls(p, detail=True)
    root = p.rstrip("/")
    # a directory marker ('dir/', see makedirs) is the directory itself, not a file named like it
    if len(entries) == 1 and entries[0]["name"] == root and entries[0].get("type") == "file":
        raise path_error(NotADirectoryError, url)
    # Some tools store 'dir/' marker objects: a listing may contain the directory itself.
    names = {posixpath.basename(e["name"].rstrip("/")) for e in entries if e["name"].rstrip("/") != root}
    return sorted(n for n in names if n)


@retrying()
def glob(pattern: PathLike) -> list[str]:
    """Sorted full paths matching ``pattern`` (``*``, ``?``, ``[..]``, ``**``), in the pattern's scheme."""
    url = to_str(pattern)
    if not is_remote(url):
        return sorted(_glob.glob(local_path(url), recursive=True))
    scheme, _ = split_protocol(url)
    fs, p = filesystem(url)
    with path_errors(url):
        found = fs.glob(p)
    # a directory marker ('dir/') names the directory that the listing holds already
    return sorted({paths.unstrip(str(scheme), name.rstrip("/")) for name in found})


@retrying()
def makedirs(path: PathLike, exist_ok: bool = True) -> None:
    """Create a directory and its parents.

    On S3 an empty prefix does not exist, so a new directory gets a zero-byte ``prefix/`` marker object
    (what the S3 console's "Create folder" writes): afterwards ``exists``, ``isdir`` and ``listdir`` see
    it in every process, as they would a local folder. Other object stores: implicit directories, a no-op.
    """
    url = check_writable_scheme(path)
    if not is_remote(url):
        with path_errors(url):
            os.makedirs(local_path(url), exist_ok=exist_ok)
        return
    fs, p = filesystem(url)
    found = fs.exists(p)
    if not exist_ok and found:
        raise path_error(FileExistsError, url)
    with path_errors(url):
        fs.makedirs(p, exist_ok=True)
        bucket_only = "/" not in p.strip("/")
        if not found and not bucket_only and is_s3(fs):
            fs.pipe_file(p.rstrip("/") + "/", b"")
            fs.invalidate_cache(p)


@retrying()
def remove(path: PathLike) -> None:
    """Delete a file; directories need :func:`rmtree`."""
    url = check_writable_scheme(path)
    if stat(url)["type"] == "directory":
        raise path_error(IsADirectoryError, url, "use rmtree for directories")
    if not is_remote(url):
        with path_errors(url):
            os.remove(local_path(url))
        return
    fs, p = filesystem(url)
    with path_errors(url):
        fs.rm_file(p)


@retrying()
def rmtree(path: PathLike) -> None:
    """Delete a directory and everything under it."""
    url = check_writable_scheme(path)
    if stat(url)["type"] != "directory":
        raise path_error(NotADirectoryError, url, "use remove for files")
    if not is_remote(url):
        with path_errors(url):
            shutil.rmtree(local_path(url))
        return
    fs, p = filesystem(url)
    with path_errors(url):
        fs.rm(p, recursive=True)


@retrying()
def last_modified(path: PathLike) -> float:
    """Modification time in seconds since the epoch (object stores: of the object; no remote dirs)."""
    url = to_str(path)
    if not is_remote(url):
        with path_errors(url):
            return os.path.getmtime(local_path(url))
    meta = stat(url)
    if meta["type"] == "directory":
        raise path_error(IsADirectoryError, url, "remote directories have no modification time")
    return modified_time(url, meta)


@retrying()
def size(path: PathLike) -> int:
    """Size of a file in bytes; for a directory, the total size of the files under it."""
    url = to_str(path)
    meta = stat(url)
    if meta["type"] == "file":
        return int(meta.get("size") or 0)
    if not is_remote(url):
        total = 0
        for root, _, files in os.walk(local_path(url)):
            total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
        return total
    fs, p = filesystem(url)
    with path_errors(url):
        return int(fs.du(p, total=True))


def md5(path: PathLike, progress: bool | None = None) -> str:
    """Hex MD5 of a file's bytes, streamed in chunks (the same for local and remote copies)."""
    url = to_str(path)
    meta = stat(url)
    if meta["type"] == "directory":
        raise path_error(IsADirectoryError, url, "md5 needs a file")
    digest = hashlib.md5(usedforsecurity=False)
    bar = make_bar(meta.get("size"), paths.basename(url), progress)
    try:
        with _open(url, "rb", progress=False) as f:
            while chunk := f.read(CHUNK_SIZE):
                digest.update(chunk)
                bar.update(len(chunk))
    finally:
        bar.close()
    return digest.hexdigest()


def _probe_local_dir(directory: str) -> bool:
    try:
        os.unlink(local_temp_for(os.path.join(directory, ".xdpx-write-probe")))
        return True
    except OSError:
        return False


def _probe_remote_dir(url: str) -> bool:
    fs, _ = filesystem(url)
    probe_url = paths.join(url, f".xdpx-write-probe-{uuid.uuid4().hex[:12]}")
    probe = fs._strip_protocol(probe_url)
    try:
        fs.pipe_file(probe, b"")
        return True
    except Exception:  # any refusal (403, read-only backend, no bucket) means "not writable"
        return False
    finally:
        try:
            if fs.exists(probe):
                fs.rm_file(probe)
        except Exception:
            pass


def output_path_problem(path: PathLike) -> str | None:
    """Why nothing can be written at ``path``, whatever is there, or None: an empty path (it would name the
    working directory or nothing, by backend), or, locally, a symbolic link on the way that points to
    nothing (os.makedirs stops at it). Commands check it before any work, so ``--dry`` finds it."""
    url = to_str(path)
    if not url.strip():
        return "an empty path: name a folder (or file) to write"
    if is_remote(url):
        return None
    current = os.path.abspath(local_path(url))
    while not os.path.exists(current):
        if os.path.islink(current):
            return (f"{current} is a symbolic link to {os.readlink(current)!r}, which does not exist: create its "
                    "target, or choose another path")
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent
    return None


def is_writable(path: PathLike) -> bool:
    """Whether a file or directory at ``path`` could be written (created, or replaced if it exists).

    Local: creates and deletes a temp file in the directory that would hold it (or its nearest existing
    ancestor), which also catches read-only mounts. Remote: a tiny put + delete in the nearest existing
    prefix. Nothing is left behind.
    """
    url = to_str(path)
    remote = is_remote(url)
    if remote and paths.protocol_of(url) == "http":
        return False
    is_dir = isdir if remote else (lambda u: os.path.isdir(local_path(u)))
    is_file = isfile if remote else (lambda u: os.path.isfile(local_path(u)))
    cur = url if remote else os.path.abspath(local_path(url))
    if is_file(cur):
        if not remote and not os.access(cur, os.W_OK):
            return False
        cur = paths.dirname(cur)
    while not is_dir(cur):
        if is_file(cur):
            return False  # a file where a folder would have to be
        parent = paths.dirname(cur)
        if parent.endswith("://"):
            # Above the bucket: creating buckets is not a write we promise; memory:// has one flat root.
            if paths.protocol_of(url) != "memory":
                return False
            cur = parent
            break
        if parent == cur:
            return False
        cur = parent
    return _probe_remote_dir(cur) if remote else _probe_local_dir(cur)
