"""``open()`` for local and remote paths, with atomic writes."""

from __future__ import annotations

import builtins
import io
import os
from typing import IO, Any

from .atomic import open_local_writer, open_remote_writer
from .backends import put_file, read_kwargs
from .credentials import filesystem
from .errors import path_errors
from .paths import PathLike, basename, check_writable_scheme, is_remote, local_path, to_str
from .progress import make_bar, should_show
from .retry import retrying


class _ProgressReader(io.RawIOBase):
    """Counts the bytes read from a remote file into a progress bar; seeking passes through."""

    def __init__(self, f: Any, bar: Any):
        super().__init__()
        self._f = f
        self._bar = bar

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = self._f.read(len(b))
        n = len(data)
        b[:n] = data
        self._bar.update(n)
        return n

    def seekable(self) -> bool:
        return self._f.seekable()

    def seek(self, pos: int, whence: int = 0) -> int:
        return self._f.seek(pos, whence)

    def tell(self) -> int:
        return self._f.tell()

    def close(self) -> None:
        if not self.closed:
            self._bar.close()
            self._f.close()
        super().close()


def _upload_on_commit(url: str, progress: bool | None) -> Any:
    def upload(tmp: str) -> None:
        size = os.path.getsize(tmp)
        bar = make_bar(size, basename(url), progress)
        try:
            put_file(tmp, url, bar, size)
        finally:
            bar.close()

    return upload


@retrying()
def open(  # shadows builtins.open on purpose: xdpx.io.open is the one way to open files
    path: PathLike,
    mode: str = "r",
    encoding: str | None = None,
    progress: bool | None = None,
    *,
    newline: str | None = None,
    errors: str | None = None,
) -> IO[Any]:
    """Open a local or remote file.

    Text modes default to utf-8. ``'w'``/``'wb'`` are atomic: the content appears under ``path`` only when
    the file is closed without an exception (local: temp file + rename, parent dirs created; remote: local
    temp file + one upload on close). Remote paths support ``'r'``, ``'rb'``, ``'w'``, ``'wb'``; local paths
    also append (``'a'``) and the other modes of the builtin ``open``. ``progress`` forces a byte progress bar
    for remote reads and uploads on or off (None: automatic, see :mod:`xdpx.io.progress`).
    """
    url = to_str(path)
    text = "b" not in mode
    if not text and (encoding or newline is not None or errors):
        raise ValueError(f"binary mode {mode!r} takes no encoding/newline/errors (opening {url})")
    kw: dict[str, Any] = {"encoding": encoding or "utf-8", "newline": newline, "errors": errors} if text else {}
    kind = mode.replace("b", "").replace("t", "")

    if not is_remote(url):
        lp = local_path(url)
        if kind == "w":
            return open_local_writer(lp, mode, **kw)  # type: ignore[return-value]
        if kind[:1] in ("a", "x"):
            parent = os.path.dirname(os.path.abspath(lp))
            os.makedirs(parent, exist_ok=True)
        return builtins.open(lp, mode, **kw)

    if kind == "w":
        check_writable_scheme(url)
        filesystem(url)  # fail now, not at close, when the backend is missing or misconfigured
        return open_remote_writer(url, "w" if text else "wb", _upload_on_commit(url, progress), **kw)  # type: ignore[return-value]
    if kind != "r":
        raise ValueError(f"mode {mode!r} is not supported for remote paths ({url}): use 'r', 'rb', 'w' or 'wb'")

    fs, p = filesystem(url)
    with path_errors(url):
        f: Any = fs.open(p, "rb", **read_kwargs(fs))
    size = getattr(f, "size", None)
    if should_show(size, progress):
        f = io.BufferedReader(_ProgressReader(f, make_bar(size, basename(url), progress)))
    if text:
        return io.TextIOWrapper(f, **kw)
    return f  # type: ignore[no-any-return]
