"""The grouping of tests on xdist workers (tests/conftest.py, group_for_workers) takes effect: under
``--dist loadgroup`` a test's node id carries its group, which is what the scheduler reads. pytest 9.2 with
pytest-xdist 3.8 dropped the suffix silently (every folder's session fixtures were then built on both workers);
pyproject pins pytest below 9.2 for that."""

from __future__ import annotations

import os

import pytest


def test_the_node_id_carries_the_group_under_loadgroup(request: pytest.FixtureRequest) -> None:
    if "PYTEST_XDIST_WORKER" not in os.environ or not request.config.getvalue("loadgroup"):
        pytest.skip("runs under pytest-xdist with --dist loadgroup (the addopts of pyproject.toml)")
    assert request.node.nodeid.endswith("@test_worker_groups.py"), request.node.nodeid
