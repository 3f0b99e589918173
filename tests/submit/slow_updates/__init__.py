"""A user_dir for the preemption test of x-submit: with XDPX_TEST_UPDATE_SECONDS=S in the environment, every
update of x-train starts S seconds late, so that a test can send Slurm's signal while the run is in the
middle of training. Waiting changes no result. Without the variable, importing it changes nothing."""

from __future__ import annotations

import os
import time

if os.environ.get("XDPX_TEST_UPDATE_SECONDS"):
    from xdpx.train import loop

    pause = float(os.environ["XDPX_TEST_UPDATE_SECONDS"])
    original = loop.Trainer._update_with_auto_ga

    def _update_with_auto_ga(self, *args):  # type: ignore[no-untyped-def]
        time.sleep(pause)
        return original(self, *args)

    loop.Trainer._update_with_auto_ga = _update_with_auto_ga
