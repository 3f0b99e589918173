"""``x-script bce_threshold``: the original XDPX's name of ``x-script best_threshold`` (same flags, same
output): the decision threshold with the best F-beta on x-pred's dev predictions of a binary, bce or
multilabel run. See xdpx/scripts/best_threshold.py."""

from __future__ import annotations

from xdpx.command import script
from xdpx.scripts.best_threshold import USAGE as BEST_USAGE
from xdpx.scripts.best_threshold import Threshold, best_threshold, f_beta, thresholds
from xdpx.scripts.best_threshold import main as best_threshold_main

USAGE = BEST_USAGE.replace("best_threshold", "bce_threshold")

__all__ = ["USAGE", "Threshold", "best_threshold", "f_beta", "main", "thresholds"]


@script("bce_threshold")
def main(argv: list[str]) -> int:
    """The decision threshold with the best F-beta (the original XDPX's name of x-script best_threshold)."""
    return best_threshold_main(argv, USAGE)
