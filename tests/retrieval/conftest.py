"""Fixtures of the retrieval tests: the committed STS-B retrieval sample through x-prepro, a tiny run."""

from __future__ import annotations

from pathlib import Path

import pytest
from rerank_helpers import rerank_data, train_reranker
from retrieval_helpers import prepro, run_killable, train_config


@pytest.fixture(scope="session")
def retrieval_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepro(tmp_path_factory.mktemp("retrieval"))


@pytest.fixture(scope="session")
def retrieval_run(retrieval_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Trained in its own process, as the reference of the kill -9 test (a run in the pytest process could
    differ in the last bits: another torch thread count)."""
    root = tmp_path_factory.mktemp("retrieval_run")
    assert run_killable(train_config(root, retrieval_data)) == 0
    return root / "run"


@pytest.fixture(scope="session")
def reranker(retrieval_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny cross-encoder (re2) trained on pairs mined with the tiny bi-encoder (rerank_helpers.py)."""
    root = tmp_path_factory.mktemp("reranker")
    return train_reranker(root, rerank_data(root, retrieval_run))
