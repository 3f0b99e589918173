"""OpenMP's wait policy on shared machines, chosen when x-train starts, before torch loads OpenMP.

torch's CPU threads meet at a barrier after every parallel operation. By default (libgomp) a thread that
arrives first spins there for a while instead of sleeping. On idle cores that is the fastest; on cores
that other processes keep busy, the spinning thread burns the time slice its partner needs to arrive, and
training gets several times slower (docs/train.md, "CPU threads on a busy machine", has the figures). With
``OMP_WAIT_POLICY=PASSIVE`` waiting threads sleep. The policy changes no number a run computes (the thread
count, which sets how sums are split, stays as it is), so choosing it by the load keeps runs reproducible.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping

# set by the user: then XDPX chooses nothing
USER_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, e.g. a container's or taskset's cpuset)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def load_average() -> float | None:
    """The 1-minute load average (runnable processes, summed over all cores), or None where unknown."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # Windows
        return None


def choose_wait_policy(environ: MutableMapping[str, str] | None = None, cores: int | None = None,
                       load: float | None = None) -> str | None:
    """Set OMP_WAIT_POLICY=PASSIVE in ``environ`` when the cores are busy (the load average is at least the
    number of usable cores) and the user set no wait policy; return the one line to print, else None.

    Only effective before torch is first imported in this process (OpenMP reads the variable when it
    loads), so it does nothing once torch is in (a Python session, a test); processes started later
    (x-train's own workers, torchrun ranks, x-tune's trials) inherit it.
    """
    environ = os.environ if environ is None else environ
    if "torch" in sys.modules or any(name in environ for name in USER_VARIABLES):
        return None
    cores = usable_cores() if cores is None else cores
    load = load_average() if load is None else load
    if load is None or load < cores:
        return None
    environ["OMP_WAIT_POLICY"] = "PASSIVE"
    return (f"load average {load:.1f} on {cores} usable core(s), other processes hold the CPUs: "
            "OMP_WAIT_POLICY=PASSIVE for this run (waiting threads sleep instead of spinning; the results are "
            "the same; set OMP_WAIT_POLICY yourself to choose)")
