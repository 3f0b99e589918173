"""``python chain_runner.py x-train a.hjson x-eval b.hjson ...``: a command chain, for torchrun in tests."""

from __future__ import annotations

import sys

from xdpx.cli import run_chain

sys.exit(run_chain(sys.argv[1:]))
