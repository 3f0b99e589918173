"""Turn backend errors into standard exceptions that name the path the user gave.

fsspec backends report stripped names (``bucket/key`` without ``s3://``) or none at all; a user looking at
``FileNotFoundError: b/k`` cannot tell which option held the bad path.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager

from .credentials import redact

_ERRNO = {
    FileNotFoundError: (errno.ENOENT, "No such file or directory"),
    FileExistsError: (errno.EEXIST, "File exists"),
    IsADirectoryError: (errno.EISDIR, "Is a directory"),
    NotADirectoryError: (errno.ENOTDIR, "Not a directory"),
    PermissionError: (errno.EACCES, "Permission denied"),
}


def path_error(cls: type[OSError], path: str, detail: str | None = None) -> OSError:
    """``cls(errno, message, path)``, so ``str(e)`` ends with the path and ``e.filename`` is it.

    The path goes through :func:`redact` too: signed URLs carry tokens.
    """
    code, message = _ERRNO.get(cls, (errno.EIO, "I/O error"))
    if detail:
        message = f"{message} ({redact(detail)})"
    return cls(code, message, redact(path))


@contextmanager
def path_errors(path: str) -> Iterator[None]:
    """Re-raise filesystem errors with ``path`` (as given, scheme included) as their filename."""
    try:
        yield
    except tuple(_ERRNO) as e:
        if getattr(e, "filename", None) == path and redact(path) == path:
            raise
        for cls in _ERRNO:
            if isinstance(e, cls):
                # Keep the backend's words only when they add something (e.g. AccessDenied reasons).
                detail = None if cls is FileNotFoundError else (e.strerror or str(e))
                raise path_error(cls, path, detail) from e
        raise
