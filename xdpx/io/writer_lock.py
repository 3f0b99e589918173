"""One writer per output folder: x-train's save_dir, x-prepro's data_dir (x-tune guards its study folder
with xdpx/io/study_folder.py, since several workers of one study share it).

The lock is a file in the folder, ``.xdpx-lock``, holding a JSON record of its holder: the command, the
host, the pid, the process's start time (pids are reused) and since when it holds the lock.

- Local folders: ``flock`` on the lock file. The kernel drops a flock when its process dies, however it
  dies, so a live holder always blocks a second writer on this host (and on other hosts where the
  filesystem carries flock across hosts, as NFSv4 does). A record left by a holder on another host is
  honoured even when the flock is free: flock may not reach across hosts on every network filesystem.
- Object stores (and local filesystems without flock): the record is created with a conditional put
  (``If-None-Match: *`` on S3: the store creates it for exactly one of two racing writers); a store
  without conditional writes gets check-then-write (the window of one request).
- A stale record, of a process that is gone on this host (no such pid, or a pid whose process started
  at another time), is taken over; one of another host is reported with how to remove it.

Release (normal end, error, exit 3 of a preemption) deletes the record; a SIGKILL leaves it, stale.
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import hashlib
import json
import os
import socket
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from xdpx.config.errors import ConfigError

from .credentials import filesystem, redact
from .ops import listdir, makedirs, remove
from .paths import is_remote, join

LOCK_FILE = ".xdpx-lock"
_RETRIES = 20  # reads of a record a holder is still writing (0.05 s apart)
_NO_FLOCK = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)


class FolderLocked(ConfigError):
    """Another process writes the folder: one line naming the holder and what to do (exit 2)."""


# ---- who holds it ------------------------------------------------------------------------------------------


def _process_start(pid: int) -> str | None:
    """When process ``pid`` started (boot id + clock ticks since boot, Linux); None where unknown."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()[:8]
    except (OSError, IndexError):
        return None
    return f"{boot}-{fields[19]}"  # field 22 of stat; fields[0] is field 3 (after "pid (comm)")


def _alive(pid: int, started: str | None) -> bool:
    """Whether the process ``pid`` of this host still runs and is the one that started at ``started``."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        pass
    try:  # a zombie (killed, not yet reaped by its parent) answers kill(0) but holds nothing
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                return False
    except (OSError, IndexError):
        pass
    now = _process_start(pid)
    return started is None or now is None or now == started


def _record(command: str) -> dict[str, Any]:
    return {"about": f"{command} is writing this folder: one writer at a time (docs/reliability.md)",
            "command": command, "host": socket.gethostname(), "pid": os.getpid(),
            "process_start": _process_start(os.getpid()), "since": time.time(), "token": uuid.uuid4().hex}


def _parse(text: str) -> dict[str, Any] | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) and isinstance(data.get("pid"), int) else None


_left_behind: set[str] = set()  # tokens of locks this process released but could not delete (a store down)


def _is_stale(holder: dict[str, Any]) -> bool:
    """A holder of this host that is gone (another host's holder is never taken for gone), or a lock this
    process released without deleting its record (the next command of the process takes it over)."""
    if holder.get("token") in _left_behind:
        return True
    return holder.get("host") == socket.gethostname() and not _alive(holder["pid"], holder.get("process_start"))


def describe(holder: dict[str, Any] | None) -> str:
    """``x-train on host h, pid 12, since 2026-11-27 19:40:01 UTC``."""
    if holder is None:
        return "a process whose record cannot be read"
    since = holder.get("since")
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(since)) if isinstance(since, (int, float)) else "?"
    return f"{holder.get('command', 'a command')} on host {holder.get('host', '?')}, pid {holder['pid']}, since {when}"


def held_problem(holder: dict[str, Any] | None, lock_path: str) -> str:
    """Why the folder is refused, and what to do: the words of every refusal."""
    said = f"another run is writing it ({describe(holder)})"
    if holder is not None and holder.get("host") != socket.gethostname():
        return (f"{said}; this is host {socket.gethostname()}, so XDPX cannot tell whether it still runs. Wait "
                f"for it to end; if that job is really gone (killed, its node lost), remove the lock "
                f"(x-io rm {redact(lock_path)}) and run again")
    stop = f"stop it (kill {holder['pid']})" if holder is not None else "stop it"
    return f"{said}. Wait for it to end, or {stop}, then run again: one writer per folder"


def entries(folder: str) -> list[str]:
    """The names in ``folder`` besides its lock file (which a killed writer may leave)."""
    return [name for name in listdir(folder) if name != LOCK_FILE]


# ---- acquiring -----------------------------------------------------------------------------------------------


class WriterLock:
    """The lock of ``folder`` for ``command``; :meth:`acquire` raises :class:`FolderLocked` naming the holder
    (``where``: the refusal's start, e.g. ``config.hjson: key 'save_dir': x-train refuses to write 'runs/a'``)."""

    def __init__(self, folder: str, command: str, where: str) -> None:
        self.folder, self.command, self.where = folder, command, where
        self.path = join(folder, LOCK_FILE)
        self.fd: int | None = None
        self.token: str | None = None
        self.created_folder = False
        self.stale: dict[str, Any] | None = None  # the record of a gone holder this lock replaced
        self.pid = os.getpid()  # a forked child inherits the object, not the lock: it must not release it

    def acquire(self) -> None:
        existed = os.path.isdir(self.folder) if not is_remote(self.folder) else True
        if not is_remote(self.folder):
            makedirs(self.folder)
            self.created_folder = not existed
        try:
            record = _record(self.command)
            if is_remote(self.folder):
                self._acquire_record(record)
            else:
                self._acquire_local(record)
            self.token = record["token"]
        except BaseException:
            self._remove_created_folder()
            raise

    def refuse(self, holder: dict[str, Any] | None) -> FolderLocked:
        return FolderLocked(f"{self.where}: {held_problem(holder, self.path)}")

    def _acquire_local(self, record: dict[str, Any]) -> None:
        for _ in range(_RETRIES):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                holder = read_holder(self.path)
                if holder is None or _is_stale(holder):  # being written, or a probe holds it for a moment
                    time.sleep(0.05)
                    continue
                raise self.refuse(holder) from None
            except OSError as error:
                os.close(fd)
                if error.errno not in _NO_FLOCK:
                    raise
                self._acquire_record(record)  # a filesystem without flock: the record alone
                return
            try:  # the file may have been released (unlinked) between our open and our flock: open it again
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            previous = _parse(os.pread(fd, 65536, 0).decode("utf-8", "replace"))
            if previous is not None and previous.get("host") != record["host"]:
                os.close(fd)  # another host's holder: flock may not reach across hosts
                raise self.refuse(previous)
            self.stale = previous  # its flock is gone: so is its process
            data = json.dumps(record, indent=1).encode() + b"\n"
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
            os.fsync(fd)
            self.fd = fd
            return
        raise self.refuse(read_holder(self.path))

    def _acquire_record(self, record: dict[str, Any]) -> None:
        data = json.dumps(record, indent=1) + "\n"
        for _ in range(_RETRIES):
            if create_once(self.path, data):
                return
            holder = read_holder(self.path)
            if holder is None:  # gone meanwhile, or a holder is still writing it
                time.sleep(0.05)
                continue
            if not _is_stale(holder):
                raise self.refuse(holder)
            with _host_lock(self.path):  # two takers of one stale record on this host: one at a time
                if read_holder(self.path) == holder:
                    _remove_quiet(self.path)
                    self.stale = holder
        raise self.refuse(read_holder(self.path))

    def release(self) -> None:
        """Delete the record (only while it is still this holder's) and drop the flock."""
        if self.token is None or self.pid != os.getpid():
            return
        try:
            if self.fd is not None:
                _remove_quiet(self.path)  # unlinked before the flock goes: a waiter then opens a new file
                os.close(self.fd)
                self.fd = None
            elif (read_holder(self.path) or {}).get("token") == self.token:
                _remove_quiet(self.path)
        except Exception:  # noqa: BLE001 - an object store that does not answer (the error being raised already)
            # the record stays: this process's next command, or the next run on this host once this process
            # has ended, takes it over
            _left_behind.add(self.token)
        finally:
            self.token = None
            self._remove_created_folder()

    def _remove_created_folder(self) -> None:
        """A folder made only to hold the lock, left empty: gone again (the command wrote nothing)."""
        if self.created_folder:
            try:
                os.rmdir(self.folder)
            except OSError:
                pass
            self.created_folder = False


def create_once(path: str, data: str) -> bool:
    """Create ``path`` holding ``data`` unless it exists; whether this call created it."""
    if not is_remote(path):
        # written whole under a temporary name, then linked in place (link fails when the name exists): a
        # reader never sees the file empty or half written, as it could between an O_EXCL create and its write
        temporary = f"{path}.{uuid.uuid4().hex[:12]}.tmp"
        with open(temporary, "w", encoding="utf-8") as f:
            f.write(data)
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
        except OSError:  # a filesystem without hard links: an exclusive create, written at once
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                return False
            with os.fdopen(fd, "w") as f:
                f.write(data)
        finally:
            _remove_quiet(temporary)
        return True
    fs, p = filesystem(path)
    try:
        fs.pipe_file(p, data.encode(), mode="create")  # s3fs: put_object with IfNoneMatch="*"
    except FileExistsError:
        return False
    except OSError as error:  # some stores answer a failed condition with 412 under another name
        if "precondition" in str(error).lower() or getattr(error, "errno", None) == errno.EINVAL:
            return False
        raise
    return True


def read_record(path: str) -> str | None:
    """A lock or study record's text, read fresh (no cached listing of a store); None when there is none."""
    try:
        if is_remote(path):
            fs, p = filesystem(path)
            fs.invalidate_cache(p)
            return fs.cat_file(p).decode("utf-8", "replace")
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


def read_holder(path: str) -> dict[str, Any] | None:
    """The record of a lock file; None when there is none or it cannot be read (yet)."""
    text = read_record(path)
    return None if text is None else _parse(text)


def _remove_quiet(path: str) -> None:
    try:
        remove(path)
    except FileNotFoundError:
        pass


@contextmanager
def _host_lock(path: str) -> Iterator[None]:
    name = hashlib.sha256(path.encode()).hexdigest()[:16]
    with open(os.path.join(tempfile.gettempdir(), f"xdpx-lock-{os.getuid()}-{name}"), "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        yield


# ---- holding it for a run ------------------------------------------------------------------------------------

_held: dict[str, WriterLock] = {}  # folder -> the lock this process holds there


def hold(folder: str, command: str, where: str) -> None:
    """Take the lock of ``folder`` for the rest of this command (:func:`scope`), or of the process."""
    key = folder if is_remote(folder) else os.path.realpath(folder)
    if key in _held and _held[key].pid == os.getpid():  # held already (a Trainer built twice in one process)
        return
    lock = WriterLock(folder, command, where)
    lock.acquire()
    _held[key] = lock
    if lock.stale is not None:
        print(f"note: {redact(folder)}: took over the lock of {describe(lock.stale)}: that process is gone "
              "(killed, or its host restarted)", flush=True)


def current_holder(folder: str) -> dict[str, Any] | None:
    """The live holder of ``folder``'s lock other than this process, or None (the check before any work)."""
    path = join(folder, LOCK_FILE)
    holder = read_holder(path)
    key = folder if is_remote(folder) else os.path.realpath(folder)
    if holder is None or (key in _held and _held[key].pid == os.getpid()) or _is_stale(holder):
        return None
    if not is_remote(path) and holder.get("host") == socket.gethostname() and not _flocked(path):
        return None  # the process lives on, but it no longer holds the lock (a pid reused without /proc)
    return holder


def refuse_if_held(folder: str, where: str) -> None:
    """Raise :class:`FolderLocked` when another process holds ``folder``'s lock (``--dry`` checks this)."""
    holder = current_holder(folder)
    if holder is not None:
        raise FolderLocked(f"{where}: {held_problem(holder, join(folder, LOCK_FILE))}")


def _flocked(path: str) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return True  # no flock here: the record decides
    finally:
        os.close(fd)
    return False


def release_all() -> None:
    """Release every lock this process holds."""
    while _held:
        _, lock = _held.popitem()
        lock.release()


@contextmanager
def scope() -> Iterator[None]:
    """Release, on every way out of the block, the locks taken inside it (:func:`hold`)."""
    before = set(_held)
    try:
        yield
    finally:
        for key in [k for k in _held if k not in before]:
            _held.pop(key).release()


atexit.register(release_all)  # a Trainer built outside a command: released when the process ends
