"""Fixtures of the x-submit tests: a real one-node Slurm cluster (slurm_cluster.py) for the session.

CI sets XDPX_REQUIRE_SLURM=1 (.ci/run installs slurm-wlm and munge): there a machine without Slurm fails
these tests instead of skipping them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster, missing_tools, start_cluster
from submit_helpers import local_torchrun, write_config

from xdpx.io.testing import unavailable


@pytest.fixture(scope="session")
def slurm() -> Iterator[SlurmCluster]:
    """munged + slurmctld + slurmd (one node, localhost) from a temp dir; SLURM_CONF points at it."""
    missing = missing_tools()
    if missing:
        unavailable("XDPX_REQUIRE_SLURM", f"Slurm is not installed (missing {', '.join(missing)}): apt-get install -y slurm-wlm munge")
    if os.geteuid() != 0:
        unavailable("XDPX_REQUIRE_SLURM", "slurmd must run as root to start jobs (run the Slurm tests as root, e.g. in CI's container)")
    cluster = start_cluster()
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("SLURM_CONF", str(cluster.conf))
            yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def local_run(reviews: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny config trained by a local ``torchrun --nproc_per_node=2`` (the reference of the jobs)."""
    folder = tmp_path_factory.mktemp("local")
    local_torchrun(folder, write_config(folder / "local.hjson", reviews, "runs/local"))
    return folder / "runs/local"
