"""``python -m xdpx.submit.chain x-train a.hjson``: what one step of a submitted job runs in each process.

torchrun starts it with ``-m`` (the job then needs no console script on PATH, only the Python that
submitted it); it is the ordinary dispatcher of :mod:`xdpx.cli`.
"""

from __future__ import annotations

import sys

from xdpx.chain import run_chain

if __name__ == "__main__":
    sys.exit(run_chain(sys.argv[1:]))
