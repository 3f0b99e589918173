"""Atomic writes: readers see the old file or the complete new one, never a partial write.

Local: write a hidden temp file in the target's directory, fsync, ``os.replace`` on close (same filesystem,
so the rename is atomic). Remote: write a local temp file, upload it in one put on close (an object store
publishes an object only when its put or multipart upload completes). An exception inside the ``with``
block, or a writer dropped without close(), discards the temp file and leaves the old content intact.
"""

from __future__ import annotations

import builtins
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable
from typing import IO, Any


def _unlink_quiet(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


_TEMP_ID_LENGTH = 12  # hex digits of a uuid4 in a local temp file's name


def is_temp_of(name: str, target_name: str) -> bool:
    """Whether the file ``name`` is a temp file :func:`local_temp_for` made for a file named ``target_name``
    (``.<target_name>.<12 hex>.tmp``): what a write cut short by a kill leaves beside its target."""
    prefix, suffix = f".{target_name}.", ".tmp"
    middle = name[len(prefix):-len(suffix)]
    return (name.startswith(prefix) and name.endswith(suffix) and len(middle) == _TEMP_ID_LENGTH
            and all(c in "0123456789abcdef" for c in middle))


def local_temp_for(target: str) -> str:
    """Create an empty temp file next to local ``target`` (parent dirs made) and return its path."""
    parent = os.path.dirname(os.path.abspath(target))
    os.makedirs(parent, exist_ok=True)
    while True:
        tmp = os.path.join(parent, f".{os.path.basename(target)}.{uuid.uuid4().hex[:_TEMP_ID_LENGTH]}.tmp")
        try:
            # 0o666 minus the umask, like a normal file: mkstemp's 0o600 would make every
            # checkpoint private to its writer.
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:  # a uuid clash; practically never
            continue
        os.close(fd)
        return tmp


def commit_local(tmp: str, target: str) -> None:
    """Move a finished temp file over ``target`` atomically, keeping the old file's permissions."""
    if os.path.exists(target):
        try:
            shutil.copymode(target, tmp)
        except OSError:
            pass
    os.replace(tmp, target)


def upload_temp_dir() -> str:
    """``<system temp dir>/xdpx-uploads-<uid>``: one folder per user, so a sweep sees only its own files."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return os.path.join(tempfile.gettempdir(), f"xdpx-uploads-{uid}")


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def sweep_upload_temps() -> list[str]:
    """Delete the upload temp files of processes that are gone (killed during an upload); return them.

    A temp file is named ``<pid>-<random>.tmp`` after the process that wrote it: a live process's files
    are never touched.
    """
    folder = upload_temp_dir()
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    swept = []
    for name in names:
        pid = name.split("-", 1)[0]
        if name.endswith(".tmp") and pid.isdigit() and int(pid) != os.getpid() and not _process_alive(int(pid)):
            _unlink_quiet(os.path.join(folder, name))
            swept.append(name)
    return swept


_swept = False


def remote_temp() -> str:
    """A new local temp file for an upload, in :func:`upload_temp_dir`. The first call
    of a process sweeps the files that killed processes left there."""
    global _swept
    folder = upload_temp_dir()
    os.makedirs(folder, exist_ok=True)
    if not _swept:
        _swept = True
        sweep_upload_temps()
    fd, tmp = tempfile.mkstemp(prefix=f"{os.getpid()}-", suffix=".tmp", dir=folder)
    os.close(fd)
    return tmp


class AtomicWriter:
    """A writable file whose content replaces the target only on a successful close().

    Everything else (write, writelines, tell, seek, flush, fileno, encoding, ...) is the temp file's.
    """

    def __init__(self, target: str, tmp: str, mode: str, commit: Callable[[str], None], **open_kw: Any):
        self._done = True  # until the temp file is open, there is nothing to discard
        self.name = target
        self._tmp = tmp
        self._commit = commit
        self._file: IO[Any] = builtins.open(tmp, mode, **open_kw)
        self._done = False

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # during __init__/__del__ the private attributes may not exist yet
            raise AttributeError(name)
        return getattr(self._file, name)

    @property
    def closed(self) -> bool:
        return self._done

    def close(self) -> None:
        """Flush, fsync and publish the content under the target name."""
        if self._done:
            return
        self._done = True
        try:
            self._file.flush()
            os.fsync(self._file.fileno())  # the rename must not outlive the data in a crash
            self._file.close()
            self._commit(self._tmp)
        finally:
            if not self._file.closed:
                self._file.close()
            _unlink_quiet(self._tmp)

    def discard(self) -> None:
        """Drop everything written; the target is left as it was."""
        if self._done:
            return
        self._done = True
        try:
            self._file.close()
        finally:
            _unlink_quiet(self._tmp)

    def __enter__(self) -> AtomicWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.discard()

    def __del__(self) -> None:
        # Not closed explicitly: the writer was abandoned (e.g. after an error); never publish that.
        try:
            self.discard()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<AtomicWriter {self.name!r} {'closed' if self._done else 'open'}>"


def open_local_writer(target: str, mode: str, **open_kw: Any) -> AtomicWriter:
    tmp = local_temp_for(target)
    try:
        return AtomicWriter(target, tmp, mode, lambda t: commit_local(t, target), **open_kw)
    except BaseException:
        _unlink_quiet(tmp)
        raise


def open_remote_writer(
    target: str, mode: str, upload: Callable[[str], None], **open_kw: Any
) -> AtomicWriter:
    """``upload(tmp)`` puts the finished local temp file to ``target`` in one operation."""
    tmp = remote_temp()
    try:
        return AtomicWriter(target, tmp, mode, upload, **open_kw)
    except BaseException:
        _unlink_quiet(tmp)
        raise
