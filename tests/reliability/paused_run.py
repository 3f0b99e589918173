"""Run x-train and pause it inside the run (after its second update) until a file appears: a test then
does what it likes to the folder of a run that is certainly going on (tests/reliability/test_one_writer.py).

    python paused_run.py CONFIG READY GO
READY is created when the pause begins; the run goes on when GO exists (or after 120 s).
"""

from __future__ import annotations

import os
import sys
import time


def install(ready: str, go: str) -> None:
    from xdpx.train import loop

    original_update = loop.Trainer._update
    updates = 0

    def _update(self, *args):  # type: ignore[no-untyped-def]
        nonlocal updates
        out = original_update(self, *args)
        updates += 1
        if updates == 2:
            open(ready, "w").close()
            deadline = time.monotonic() + 120
            while not os.path.exists(go) and time.monotonic() < deadline:
                time.sleep(0.05)
        return out

    loop.Trainer._update = _update


if __name__ == "__main__":
    install(sys.argv[2], sys.argv[3])
    from xdpx.cli import run_chain

    sys.exit(run_chain(["x-train", sys.argv[1]]))
