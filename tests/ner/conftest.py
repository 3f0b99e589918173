"""Fixtures of the NER tests: x-prepro of the committed sample and one tiny trained BiLSTM-CRF run."""

from __future__ import annotations

from pathlib import Path

import pytest
from ner_helpers import prepro, train_config

from xdpx.cli import run_chain


@pytest.fixture(scope="session")
def ner_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepro(tmp_path_factory.mktemp("ner_data"))


@pytest.fixture(scope="session")
def crf_run(ner_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("crf_run")
    assert run_chain(["x-train", str(train_config(root / "train.hjson", ner_data, root / "run"))]) == 0
    return root / "run"
