"""Run x-train and SIGKILL this very process at a chosen point (used by test_resume.py).

    python kill_runner.py CONFIG WHERE N
WHERE: update (after the N-th optimizer update), eval (at the N-th validation batch), save (halfway
through writing the N-th torch.save file), never (no kill; a test kills it from outside).
"""

from __future__ import annotations

import os
import signal
import sys

config, where, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
calls = 0


def tick() -> None:
    global calls
    calls += 1
    if calls == n:
        os.kill(os.getpid(), signal.SIGKILL)


if where == "update":
    from xdpx.train import loop

    original_update = loop.Trainer._update

    def _update(self, *args):  # type: ignore[no-untyped-def]
        out = original_update(self, *args)
        tick()
        return out

    loop.Trainer._update = _update
elif where == "eval":
    from xdpx.tasks.default import Task

    original_valid_step = Task.valid_step

    def valid_step(self, *args):  # type: ignore[no-untyped-def]
        tick()
        return original_valid_step(self, *args)

    Task.valid_step = valid_step
elif where == "save":
    import io

    import torch

    original_save = torch.save

    def save(obj, f, *args, **kwargs):  # type: ignore[no-untyped-def]
        global calls
        calls += 1
        if calls == n:
            buffer = io.BytesIO()
            original_save(obj, buffer)
            data = buffer.getvalue()
            f.write(data[: len(data) // 2])
            f.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        return original_save(obj, f, *args, **kwargs)

    torch.save = save

from xdpx.cli import run_chain  # noqa: E402

sys.exit(run_chain(["x-train", config]))
