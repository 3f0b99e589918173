"""A user_dir for the x-submit tests: with XDPX_TEST_DIE_AT_UPDATE=N in the environment, the process of
rank 1 SIGKILLs itself as it starts its N-th update (as the out-of-memory killer would). Elsewhere, and
without the variable, importing it changes nothing."""

from __future__ import annotations

import os
import signal

if os.environ.get("XDPX_TEST_DIE_AT_UPDATE") and os.environ.get("RANK") == "1":
    from xdpx.train import loop

    die_at = int(os.environ["XDPX_TEST_DIE_AT_UPDATE"])
    original = loop.Trainer._update_with_auto_ga
    calls = 0

    def _update_with_auto_ga(self, *args):  # type: ignore[no-untyped-def]
        global calls
        calls += 1
        if calls == die_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(self, *args)

    loop.Trainer._update_with_auto_ga = _update_with_auto_ga
