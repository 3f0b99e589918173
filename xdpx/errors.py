"""The errors and exit codes every floor of XDPX shares; this module imports nothing of xdpx.

A :class:`UserError` is a problem the user can fix (bad data, a missing file, a refused overwrite): the
commands print it as one line, without a traceback, and exit with :data:`EXIT_FAILED`. A config problem
found before any work is a :class:`xdpx.config.errors.ConfigError` and exits with :data:`EXIT_CONFIG`.
"""

from __future__ import annotations

EXIT_CONFIG = 2  # a config or usage problem, found before any work
EXIT_FAILED = 1  # the work itself failed
# x-train stopped cleanly on SIGUSR1/SIGTERM after saving its full state: a job script requeues the job
# (x-submit's sbatch script runs `scontrol requeue`), and the next start resumes bitwise.
EXIT_REQUEUE = 3


class UserError(Exception):
    """A problem the user can fix (bad data, missing file...): printed without a traceback."""
