"""``python -m xdpx.submit.launch TORCHRUN_ARGS``: torchrun as a preemptible job step runs it.

Slurm's ``--signal=USR1@grace`` (and ``scancel --signal=USR1``) reaches every process of the step: torchrun's
agent and each rank directly (measured on the one-node Slurm of tests/submit). torchrun's agent would die
of SIGUSR1 (its default action), and srun would then kill the ranks while they save; here the agent
ignores it, and the ranks inherit that until x-train installs its own handler (so a signal during their
start does not kill them either). x-train then saves its state and exits with ``EXIT_REQUEUE`` (3); torchrun
reports any non-zero exit as its own failure (exit 1), so this module turns "every rank stopped with 3, or
was stopped by the agent after one did" back into exit 3, which the job script turns into
``scontrol requeue``. Any other failure exits 1, as torchrun would.
"""

from __future__ import annotations

import signal
import sys

from xdpx.errors import EXIT_FAILED, EXIT_REQUEUE

# how a rank that the agent stopped after another rank's exit 3 ends, when it did not save itself
_STOPPED_BY_AGENT = {-signal.SIGTERM, -signal.SIGKILL}


def requeue_exit(exit_codes: list[int]) -> bool:
    """Whether the ranks' exit codes say the run stopped on the signal with its state saved."""
    return EXIT_REQUEUE in exit_codes and all(c in _STOPPED_BY_AGENT | {EXIT_REQUEUE} for c in exit_codes)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    # lazy: torch after SIGUSR1 is ignored: a signal during its slow import must not kill the agent
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    # lazy: torch after SIGUSR1 is ignored: a signal during its slow import must not kill the agent
    from torch.distributed.run import parse_args, run

    try:
        run(parse_args(argv))
    except ChildFailedError as error:
        codes = [failure.exitcode for failure in error.failures.values()]
        if requeue_exit(codes):
            print(f"xdpx.submit.launch: the ranks stopped on a signal after saving their state (exit codes {codes})",
                  file=sys.stderr)
            return EXIT_REQUEUE
        print(f"xdpx.submit.launch: {len(codes)} rank(s) failed: exit codes {codes} (their errors are above)",
              file=sys.stderr)
        return EXIT_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
