"""Run x-train and SIGKILL this very process at a chosen point (used by test_resume.py and the kill fuzz of
tests/reliability, which calls :func:`install` in forked processes).

    python kill_runner.py CONFIG WHERE N
WHERE: update (after the N-th optimizer update), eval (at the N-th validation batch), save (halfway
through writing the N-th torch.save file), checkpoint / state (halfway through writing the N-th
checkpoint-*.pt / state.pt), commit (between the fsync and the rename of the N-th atomic file write: any
file of the run), moment (N milliseconds after the start), never (no kill; a test kills it from outside).
"""

from __future__ import annotations

import os
import signal
import sys


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def install(where: str, n: int) -> None:
    """Arrange for this process to SIGKILL itself at the N-th ``where`` (see the module docstring)."""
    calls = 0

    def tick() -> bool:
        nonlocal calls
        calls += 1
        return calls == n

    if where == "update":
        from xdpx.train import loop

        original_update = loop.Trainer._update

        def _update(self, *args):  # type: ignore[no-untyped-def]
            out = original_update(self, *args)
            if tick():
                _die()
            return out

        loop.Trainer._update = _update
    elif where == "eval":
        from xdpx.tasks.default import Task

        original_valid_step = Task.valid_step

        def valid_step(self, *args):  # type: ignore[no-untyped-def]
            if tick():
                _die()
            return original_valid_step(self, *args)

        Task.valid_step = valid_step
    elif where in ("save", "checkpoint", "state"):
        import io

        import torch

        original_save = torch.save
        wanted = {"save": lambda name: True, "checkpoint": lambda name: name.startswith("checkpoint-"),
                  "state": lambda name: name == "state.pt"}[where]

        def save(obj, f, *args, **kwargs):  # type: ignore[no-untyped-def]
            if wanted(os.path.basename(str(getattr(f, "name", "")))) and tick():
                buffer = io.BytesIO()
                original_save(obj, buffer)
                data = buffer.getvalue()
                f.write(data[: len(data) // 2])
                f.flush()
                _die()
            return original_save(obj, f, *args, **kwargs)

        torch.save = save
    elif where == "commit":
        from xdpx.io import atomic

        original_commit = atomic.commit_local

        def commit_local(tmp: str, target: str) -> None:
            if tick():
                _die()  # the temp file is complete and synced; the rename never happens
            original_commit(tmp, target)

        atomic.commit_local = commit_local
    elif where == "moment":
        import threading

        timer = threading.Timer(n / 1000, _die)
        timer.daemon = True
        timer.start()
    elif where != "never":
        raise ValueError(f"unknown kill point {where!r}")


if __name__ == "__main__":
    config, where, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    install(where, n)
    from xdpx.cli import run_chain

    sys.exit(run_chain(["x-train", config]))
