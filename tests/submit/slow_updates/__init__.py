"""A user_dir for the preemption test of x-submit: with XDPX_TEST_UPDATE_SECONDS=S in the environment, every
update of x-train starts S seconds late, so that a test can send Slurm's signal while the run is in the
middle of training. Waiting changes no result.

The variable is read at each update, not at import: x-submit imports the user_dir in the test's own process
(to check the config) while the test has the variable set, and a pause fixed at import would then slow every
later training of that process (the whole rest of the test run) after the test has unset it."""

from __future__ import annotations

import os
import time

from xdpx.train import loop

if not getattr(loop.Trainer._update_with_auto_ga, "slow_updates", False):
    original = loop.Trainer._update_with_auto_ga

    def _update_with_auto_ga(self, *args):  # type: ignore[no-untyped-def]
        pause = float(os.environ.get("XDPX_TEST_UPDATE_SECONDS") or 0)
        if pause:
            time.sleep(pause)
        return original(self, *args)

    _update_with_auto_ga.slow_updates = True  # type: ignore[attr-defined]
    loop.Trainer._update_with_auto_ga = _update_with_auto_ga
