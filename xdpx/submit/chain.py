"""``python -m xdpx.submit.chain [--run-index I] x-train a.hjson``: what one step of a submitted job runs in
each process.

torchrun starts it with ``-m`` (the job then needs no console script on PATH, only the Python that
submitted it); it is the ordinary dispatcher of :mod:`xdpx.cli`. ``--run-index I`` (a task of a job
array: ``$SLURM_ARRAY_TASK_ID``) runs only run I, in loop order, of a config with several runs.
"""

from __future__ import annotations

import signal
import sys

from xdpx.chain import run_chain


def main(argv: list[str]) -> int:
    # Slurm's warning signal (--signal=USR1@grace) reaches every process of the running step. A step that
    # does not save on it (x-prepro, x-eval, x-tune) goes on until the time limit instead of dying of
    # SIGUSR1's default action at the warning; x-train installs its own handler over this (preemption).
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    if argv[:1] == ["--run-index"]:
        return run_chain(argv[2:], run_index=int(argv[1]))
    return run_chain(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
