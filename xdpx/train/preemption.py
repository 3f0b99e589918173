"""Stopping cleanly when a scheduler asks: SIGUSR1 or SIGTERM (Slurm sends them before a time limit or a
preemption, ``--signal=USR1@<grace>``), then exit code 3 so the job script requeues the job.

The signal handler only notes the signal; the loop asks :meth:`PreemptionWatch.share` at each
update boundary (and after an evaluation), so the current update, and an evaluation already begun,
finish first. With several processes the signal may reach every rank (Slurm signals the whole step) or
rank 0 only (a ``kill`` of one process): the ranks all-reduce the flag at the boundary, so they all stop
after the same update. The loop then saves the full training state (state.pt, the same state that makes
a resume bit for bit), writes why in log.txt and exits with :data:`xdpx.errors.EXIT_REQUEUE`; running the
same command again (``resume: true``) continues exactly where it stopped (docs/train.md, "Preemption").

The watch is installed as the x-train step of a chain starts (:func:`watching_from_start`), before its
config is read: a signal during the imports, the checks or the model building is noted too, and x-train
stops at the first point where it can (:func:`stop_before_work`, or the Trainer's first update boundary)
instead of dying of the signal's default action (exit 143). A run that has reached its end when the
signal comes finishes (exit 0): the signal is noted in log.txt (loop.py).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

from xdpx.errors import EXIT_REQUEUE
from xdpx.io.credentials import redact

PREEMPTION_SIGNALS = (signal.SIGUSR1, signal.SIGTERM)


class Preempted(SystemExit):
    """x-train stopped on a preemption signal after saving its state: the process exits with
    EXIT_REQUEUE (SystemExit passes through the command chain, which stops: the rerun continues it)."""

    def __init__(self) -> None:
        super().__init__(EXIT_REQUEUE)


@contextlib.contextmanager
def handlers_restored_on_error() -> Iterator[None]:
    """Around building and training a run: when either fails, the signal handlers of before come back (a
    failed run does not close its watch; a chain or a caller's own handlers go on as before)."""
    saved = {sig: signal.getsignal(sig) for sig in PREEMPTION_SIGNALS}
    try:
        yield
    except BaseException:
        if threading.current_thread() is not threading.main_thread():  # nothing was installed (install())
            raise
        for sig, handler in saved.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        raise


class PreemptionWatch:
    """Notes SIGUSR1 / SIGTERM while a run trains; the loop asks :meth:`share` at each update
    boundary. Install it with :meth:`install`, remove it with :meth:`uninstall` (the previous handlers
    come back: a command chain or a caller's own handlers go on as before)."""

    def __init__(self) -> None:
        self.received: int | None = None  # the first signal that arrived (here or, via the flag, on a peer)
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        # Python runs signal handlers in the main thread only; a run started from another thread (a test
        # harness, a notebook's worker) keeps the process's handlers and is not preemptible this way.
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in PREEMPTION_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._note)

    def uninstall(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        self._previous.clear()

    def ignore_from_now(self) -> None:
        """After a preemption stop, on the way out (the process exits EXIT_REQUEUE): further signals are
        ignored. torchrun sends SIGTERM to the ranks still running once one has exited; a rank that is
        merely slower to exit (the state is saved) must still exit with EXIT_REQUEUE. SIG_IGN, not a Python
        handler and not a blocked mask: the disposition is the whole process's (gloo's and OpenMP's threads
        included) and stays through the interpreter's shutdown, where Python resets its own handlers."""
        for sig in PREEMPTION_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)

    def _note(self, signum: int, frame: FrameType | None) -> None:
        # Only a flag: the handler runs between two bytecodes of whatever the loop does (a forward, a
        # write); the loop acts at the next update boundary, where the state is whole.
        if self.received is None:
            self.received = signum

    @property
    def signal_name(self) -> str | None:
        return signal.Signals(self.received).name if self.received is not None else None

    def share(self, context: Any) -> bool:
        """Whether any rank received a preemption signal; a rank that did not takes its peer's. With
        several processes this is a collective (every rank calls it at the same point of the loop); the
        flag travels as a CPU tensor, which the process group sends through gloo (also beside NCCL): no
        wait on the GPU's queue."""
        if not context.distributed:
            return self.received is not None
        # lazy: loads torch
        import torch  # only here: the chain installs a watch before torch is imported (watching_from_start)

        flag = torch.tensor([float(self.received or 0)], dtype=torch.float64)
        torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
        if self.received is None and flag.item() > 0:  # a peer's signal: stop with it
            self.received = int(flag.item())
        return self.received is not None


def signal_note(watch: PreemptionWatch, update: int) -> dict[str, Any] | None:
    """What the run marker says of the signal ``watch`` received (None: none came), at ``update``."""
    if watch.received is None:
        return None
    return {"signal": watch.signal_name, "update": update, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


_started: PreemptionWatch | None = None  # the watch of the x-train step under way (watching_from_start)


@contextlib.contextmanager
def watching_from_start() -> Iterator[PreemptionWatch]:
    """Around a whole x-train step of a chain, from before its config is read to its end: SIGUSR1 / SIGTERM
    are noted from the start, and the step's runs use this watch (:func:`run_watch`). On the way out
    the handlers of before come back, except when x-train stops on a signal: the process then exits
    EXIT_REQUEUE and ignores further signals until it has (:meth:`PreemptionWatch.ignore_from_now`)."""
    global _started
    watch, previous = PreemptionWatch(), _started
    watch.install()
    _started, stopped = watch, False
    try:
        yield watch
    except Preempted:
        stopped = True
        watch.ignore_from_now()
        raise
    finally:
        _started = previous
        if not stopped:
            watch.uninstall()


def run_watch() -> tuple[PreemptionWatch, bool]:
    """The watch a run uses: the x-train step's, installed as it started, else (a Trainer built by a script
    or a test) a new one installed now; and whether it is the run's own (the run then uninstalls it)."""
    if _started is not None:
        return _started, False
    watch = PreemptionWatch()
    watch.install()
    return watch, True


def stop_before_work(save_dir: str) -> None:
    """At the last point of x-train's start-up before it writes anything: when a signal came (during the
    imports, the config's resolution or the checks), exit EXIT_REQUEUE now; the same command run again
    starts the run (or continues the one in ``save_dir``)."""
    watch = _started
    if watch is None or watch.received is None:
        return
    print(redact(f"x-train: {watch.signal_name} received while starting, before anything was written to {save_dir}: "
                 "exit code 3 (a job script of x-submit requeues the job); the same command run again starts (or continues) the run"),
          flush=True)
    raise Preempted()
