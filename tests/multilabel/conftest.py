"""Fixtures of the multi-label tests: the committed sample through x-prepro, and a tiny trained run."""

from __future__ import annotations

from pathlib import Path

import pytest
from ml_helpers import prepro, run_killable, train_config


@pytest.fixture(scope="session")
def multilabel_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepro(tmp_path_factory.mktemp("multilabel"), data_files="*.txt")


@pytest.fixture(scope="session")
def multilabel_run(multilabel_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Trained in its own process, as the reference of the kill -9 test (a run in the pytest process could
    differ in the last bits: another torch thread count)."""
    root = tmp_path_factory.mktemp("multilabel_run")
    assert run_killable(train_config(root, multilabel_data)) == 0
    return root / "run"
