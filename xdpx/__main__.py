"""``python -m xdpx x-train config.hjson ...``: any chain of config-driven commands, as the x-* console
scripts run it; for environments without the console scripts on PATH, and for x-tune's trial processes."""

import sys

from xdpx.cli import run_chain

if __name__ == "__main__":
    sys.exit(run_chain(sys.argv[1:]))
