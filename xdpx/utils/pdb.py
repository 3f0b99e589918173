"""pdb that works where plain pdb does not: worker processes and distributed runs.

    from xdpx.utils import pdb
    pdb.set_trace()                  # in rank 0 of a torchrun job; other ranks pass through

    from xdpx.utils import pdb
    pdb.set_nprocs(8)                # before the pool starts: 8 worker processes will reach set_trace
    with multiprocessing.Pool(8) as pool: ...   # in the worker code: pdb.set_trace()

Plain pdb reads sys.stdin, which multiprocessing replaces with /dev/null in its children, so the
debugger exits at once. This one reads and writes the controlling terminal (/dev/tty) of the job, or,
without a terminal, the standard input and output the parent had when set_nprocs was called.

With set_nprocs(n), the n processes that reach set_trace wait for each other; the one that arrived
first gets the prompt and the others stay paused until it continues (``c``), then all go on together, so
the workers cannot run ahead while you inspect one of them. The coordination objects are inherited
through fork (the default start method on Linux), so call set_nprocs before the processes start.
In a torchrun job, set_trace stops rank 0 only (the other ranks wait at their next collective); guard
with ``distributed_utils.is_master()`` to make that explicit.
"""

from __future__ import annotations

import multiprocessing
import os
import pdb as _pdb
import sys
from typing import Any

__all__ = ["set_nprocs", "set_trace"]

_shared: dict[str, Any] = {}


def set_nprocs(n: int) -> None:
    """Prepare ``n`` worker processes to share the debugger (call it in the parent, before they start)."""
    if n < 1:
        raise ValueError(f"set_nprocs: n must be >= 1, got {n}")
    context = multiprocessing.get_context("fork")
    _shared.clear()
    _shared.update(nprocs=n, barrier=context.Barrier(n), first=context.Value("i", 0), lock=context.Lock(),
                   stdin=os.dup(sys.stdin.fileno()) if _has_fileno(sys.stdin) else None,
                   stdout=os.dup(sys.stdout.fileno()) if _has_fileno(sys.stdout) else None)


def _has_fileno(stream: Any) -> bool:
    try:
        stream.fileno()
        return True
    except (AttributeError, OSError, ValueError):
        return False


class _LineReader:
    """readline() straight from a file descriptor, one byte at a time: several processes share the
    descriptor, so none may read ahead into the lines meant for the next one."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def readline(self) -> str:
        data = bytearray()
        while not data.endswith(b"\n"):
            chunk = os.read(self.fd, 1)
            if not chunk:
                break
            data += chunk
        return data.decode(errors="replace")


class _Writer:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def write(self, text: str) -> int:
        os.write(self.fd, text.encode())
        return len(text)

    def flush(self) -> None:
        pass


def _terminal() -> tuple[Any, Any, list[int]]:
    """(stdin, stdout, fds to close) for the debugger."""
    try:
        fd = os.open("/dev/tty", os.O_RDWR)
        return _LineReader(fd), _Writer(fd), [fd]
    except OSError:
        pass
    stdin_fd = _shared.get("stdin")
    stdout_fd = _shared.get("stdout")
    if stdin_fd is None:
        stdin_fd = sys.__stdin__.fileno() if _has_fileno(sys.__stdin__) else 0
    if stdout_fd is None:
        stdout_fd = sys.__stdout__.fileno() if _has_fileno(sys.__stdout__) else 1
    return _LineReader(stdin_fd), _Writer(stdout_fd), []


class _SharedPdb(_pdb.Pdb):
    """Pdb on the terminal; with set_nprocs, one process gets the prompt while the others wait."""

    def __init__(self) -> None:
        stdin, stdout, self._close = _terminal()
        super().__init__(stdin=stdin, stdout=stdout)
        self.use_rawinput = False
        self.prompt = f"(Pdb pid {os.getpid()}) "
        self._arrived = self._first = self._released = False

    def interaction(self, *args: Any, **kwargs: Any) -> None:
        barrier = _shared.get("barrier")
        if barrier is not None and barrier.parties > 1 and not self._arrived:
            self._arrived = True
            with _shared["lock"]:
                self._first = _shared["first"].value == 0
                if self._first:
                    _shared["first"].value = os.getpid()
            barrier.wait()  # everyone has arrived: nobody runs ahead
            if not self._first:
                barrier.wait()  # until the debugged process continues
                self._released = True
                return super().set_continue()
        return super().interaction(*args, **kwargs)

    def _release(self) -> None:
        """The debugged process goes on (continue or quit): let the waiting ones go too."""
        if self._first and not self._released:
            self._released = True
            with _shared["lock"]:
                _shared["first"].value = 0
            _shared["barrier"].wait()
        for fd in self._close:
            os.close(fd)
        self._close = []

    def set_continue(self) -> None:
        super().set_continue()
        self._release()

    def set_quit(self) -> None:
        self._release()
        super().set_quit()


def set_trace() -> None:
    """Stop in the debugger at the caller's line (rank 0 only in a torchrun job)."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and int(os.environ.get("RANK", "0")) != 0:
        return
    _SharedPdb().set_trace(sys._getframe().f_back)
