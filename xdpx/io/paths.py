"""Pure string operations on paths: no filesystem access, no fsspec import.

A path is either local (``data/train.txt``, ``~/runs/a``, ``file:///tmp/x``) or remote
(``s3://bucket/key``, ``oss://``, ``gs://``, ``http(s)://``, ``memory://``). Remote paths always use ``/``.
"""

from __future__ import annotations

import os
import posixpath
import re
from typing import Union

PathLike = Union[str, "os.PathLike[str]"]

# Schemes that name the same backend; storage options are looked up under the canonical name.
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*$")

CANONICAL_PROTOCOL = {"s3a": "s3", "gcs": "gs", "https": "http", "local": "file"}


def to_str(path: PathLike) -> str:
    """``os.fspath`` with a clear error for non-path arguments."""
    try:
        return os.fspath(path)
    except TypeError:
        raise TypeError(f"expected a path (str or os.PathLike), got {type(path).__name__}: {path!r}") from None


def split_protocol(path: PathLike) -> tuple[str | None, str]:
    """``'s3://b/k'`` -> ``('s3', 'b/k')``; a local path -> ``(None, path)``."""
    path = to_str(path)
    scheme, sep, rest = path.partition("://")
    # Only a URL scheme (RFC 3986 syntax) counts; a local name that merely contains '://' stays local.
    if sep and _SCHEME.match(scheme):
        return scheme.lower(), rest
    return None, path


def protocol_of(path: PathLike) -> str:
    """The canonical protocol of a path: ``'file'`` for local, ``'s3'`` for ``s3a://``, ``'http'`` for https."""
    scheme, _ = split_protocol(path)
    if scheme is None:
        return "file"
    return CANONICAL_PROTOCOL.get(scheme, scheme)


def is_remote(path: PathLike) -> bool:
    """True for any path with a scheme other than ``file://`` (``memory://`` counts as remote)."""
    return protocol_of(path) != "file"


def local_path(path: PathLike) -> str:
    """A local path ready for ``os`` functions: ``file://`` removed and ``~`` expanded."""
    scheme, rest = split_protocol(path)
    if scheme is not None and CANONICAL_PROTOCOL.get(scheme, scheme) != "file":
        raise ValueError(f"not a local path: {to_str(path)}")
    return os.path.expanduser(rest)


def abspath(path: PathLike) -> str:
    """Absolute local path (``~`` expanded); remote paths are returned unchanged."""
    if is_remote(path):
        return to_str(path)
    return os.path.abspath(local_path(path))


def join(*parts: PathLike) -> str:
    """Join path parts. Remote paths join with ``/``; a later part that is itself a URL replaces the rest."""
    if not parts:
        raise TypeError("join() needs at least one part")
    strs = [to_str(p) for p in parts]
    if not is_remote(strs[0]):
        return os.path.join(*strs)
    out = strs[0]
    for part in strs[1:]:
        if split_protocol(part)[0] is not None:
            out = part
        elif part:
            # 's3://' + 'b' must not become 's3:///b'
            out = out + part.lstrip("/") if out.endswith("/") else out + "/" + part.lstrip("/")
    return out


def _remote_parts(path: str) -> tuple[str, str, str]:
    """``'https://h/a/b?x=1'`` -> ``('https://', 'h/a/b', '?x=1')``; query and fragment kept apart."""
    scheme, rest = split_protocol(path)
    suffix = ""
    if scheme in ("http", "https"):
        for mark in ("?", "#"):
            if mark in rest:
                rest, tail = rest.split(mark, 1)
                suffix = mark + tail + suffix
                break
    return f"{scheme}://", rest, suffix


def dirname(path: PathLike) -> str:
    """The parent: ``'s3://b/d/f'`` -> ``'s3://b/d'``; local paths as ``os.path.dirname``."""
    path = to_str(path)
    if not is_remote(path):
        return os.path.dirname(path)
    prefix, rest, _ = _remote_parts(path)
    return prefix + posixpath.dirname(rest)


def basename(path: PathLike) -> str:
    """The last component: ``'s3://b/d/f.txt'`` -> ``'f.txt'`` (query strings of http URLs dropped)."""
    path = to_str(path)
    if not is_remote(path):
        return os.path.basename(path)
    _, rest, _ = _remote_parts(path)
    return posixpath.basename(rest)


def unstrip(scheme: str, name: str) -> str:
    """Rebuild a URL from a backend's stripped name (``'b/k'``, or ``'/k'`` for memory)."""
    return f"{scheme}://{name.lstrip('/')}"


def check_writable_scheme(path: PathLike) -> str:
    """Return ``path`` as str; ValueError for read-only schemes (http/https)."""
    url = to_str(path)
    if protocol_of(url) == "http":
        raise ValueError(f"http(s) paths are read-only: {url}")
    return url
