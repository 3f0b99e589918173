"""Fixtures of the x-prepro tests (helpers are in data_helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """An empty data_source folder."""
    folder = tmp_path / "source"
    folder.mkdir()
    return folder
