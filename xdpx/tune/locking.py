"""A lock every x-tune worker of one storage shares, on one machine or many.

Optuna's storage makes each of its writes safe, but x-tune needs a few steps to happen one worker at a
time: creating the tables of a fresh storage, reserving a trial (count the trials against max_trials,
then ``study.ask``, then check the drawn configuration is new) and rewriting the study's outputs from the
storage. A lock held in the process only covers the process; this one lives where the storage lives:

- SQLite (one machine by nature): ``flock`` on ``<database>.lock`` beside the database file. flock locks
  belong to an open file, so threads of one process exclude each other too; a killed process drops it.
- PostgreSQL: a session advisory lock (``pg_try_advisory_lock``) on a connection of its own; the server
  drops it when a killed worker's connection closes.
- Other databases: a lock of this process only (x-tune's checks after ``study.ask`` still keep a study
  within max_trials, see runner.py).

Waiting is bounded (:data:`LOCK_SECONDS`): past it a :class:`UserError` names the lock.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from xdpx.errors import UserError

LOCK_SECONDS = 300.0  # a holder keeps the lock for one ask or one rewrite of the outputs: seconds at most
POLL_SECONDS = 0.05

_local_locks: dict[tuple[str, str], threading.Lock] = {}
_engines: dict[str, Any] = {}
_registry = threading.Lock()
_held = threading.local()  # the locks this thread holds: nesting one SQLite file's lock would deadlock


def sqlite_lock_path(url: str) -> str | None:
    """``<database>.lock`` of an SQLite URL with a file; None for an in-memory database."""
    from sqlalchemy.engine import make_url  # lazy: loads sqlalchemy

    database = make_url(url).database
    if not database or database == ":memory:" or database.startswith("file::memory:"):
        return None
    return os.path.abspath(database) + ".lock"


def advisory_key(scope: str) -> int:
    """A PostgreSQL advisory lock key (signed 64 bits) for ``scope``, the same in every process."""
    return int.from_bytes(hashlib.sha256(f"xdpx-tune:{scope}".encode()).digest()[:8], "big", signed=True)


@contextmanager
def storage_lock(url: str, scope: str, timeout: float = LOCK_SECONDS) -> Iterator[None]:
    """Hold the lock ``scope`` of the storage at ``url`` against every x-tune worker of that storage.

    Scopes: ``schema`` (creating the tables), ``study:<name>:trials``, ``study:<name>:outputs``. On
    SQLite the scopes share one file, so a thread must not nest them (RuntimeError if it tries)."""
    held = getattr(_held, "scopes", None)
    if held is None:
        held = _held.scopes = set()
    if (url, scope) in held or (url.startswith("sqlite:") and any(u == url for u, _ in held)):
        raise RuntimeError(f"x-tune's storage lock {scope!r} taken twice by one thread")
    lock_file = sqlite_lock_path(url) if url.startswith("sqlite:") else None
    held.add((url, scope))
    try:
        if lock_file:
            with _flock(lock_file, scope, timeout):
                yield
        elif url.startswith(("postgresql:", "postgresql+", "postgres:")):
            with _advisory_lock(url, scope, timeout):
                yield
        else:
            with _registry:
                lock = _local_locks.setdefault((url, scope), threading.Lock())
            if not lock.acquire(timeout=timeout):
                _timed_out(scope, timeout, "this process")
            try:
                yield
            finally:
                lock.release()
    finally:
        held.discard((url, scope))


def _timed_out(scope: str, timeout: float, where: str) -> None:
    raise UserError(f"x-tune's storage lock {scope!r} ({where}) was held by another worker for more than "
                    f"{timeout:.0f} s (a worker stopped while holding it?): try again")


@contextmanager
def _flock(path: str, scope: str, timeout: float) -> Iterator[None]:
    import fcntl  # lazy: POSIX only; the lock of a local storage file

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    _timed_out(scope, timeout, path)
                time.sleep(POLL_SECONDS)
        yield  # the lock goes with the file's close below
    finally:
        os.close(fd)


def _engine(url: str) -> Any:
    from sqlalchemy import create_engine  # lazy: loads sqlalchemy
    from sqlalchemy.pool import NullPool  # lazy: loads sqlalchemy

    with _registry:
        if url not in _engines:
            # NullPool: the lock's connection is closed when released, so nothing can keep it by mistake
            _engines[url] = create_engine(url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
        return _engines[url]


@contextmanager
def _advisory_lock(url: str, scope: str, timeout: float) -> Iterator[None]:
    from sqlalchemy import text  # lazy: loads sqlalchemy

    key = advisory_key(scope)
    with _engine(url).connect() as connection:
        deadline = time.monotonic() + timeout
        while not connection.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": key}).scalar():
            if time.monotonic() > deadline:
                _timed_out(scope, timeout, "a PostgreSQL advisory lock")
            time.sleep(POLL_SECONDS)
        try:
            yield
        finally:
            connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})
