"""Fixtures of the x-tune tests: the review sample's x-prepro output comes from tests/conftest.py
(``reviews``); trials run as x-train processes that must import this checkout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def trials_import_this_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial processes inherit the environment: put this checkout first on their PYTHONPATH."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
