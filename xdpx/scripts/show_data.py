"""``x-script show_data DATA_DIR SPLIT [N]``: print N decoded samples of a split (tokens and target)."""

from __future__ import annotations

from xdpx.command import script
from xdpx.data.show import format_samples

USAGE = "usage: x-script show_data DATA_DIR SPLIT [N]"


@script("show_data")
def main(argv: list[str]) -> int:
    """Print decoded samples of an x-prepro split: x-script show_data DATA_DIR SPLIT [N]."""
    if len(argv) not in (2, 3) or (len(argv) == 3 and not argv[2].isdigit()):
        print(USAGE)
        return 2
    for line in format_samples(argv[0], argv[1], int(argv[2]) if len(argv) == 3 else 5):
        print(line)
    return 0
