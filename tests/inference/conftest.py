"""Fixtures of the x-eval / x-pred / x-serve tests: real x-prepro output of the committed samples, a
tiny trained cls_cnn run. The PostgreSQL server fixture (postgres_url) is in tests/conftest.py, shared
with the x-tune tests.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from explain_helpers import keyword_run  # noqa: F401 (the planted-keyword run of the explain tests)
from inference_helpers import PREPRO, train_run, write_json

from xdpx.cli import run_chain


@pytest.fixture(scope="session")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``prepared('reviews_char')`` -> the data_dir of that sample (x-prepro once per session)."""
    done: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in done:
            root = tmp_path_factory.mktemp(name)
            config = write_json(root / "prepro.hjson", {**PREPRO[name], "data_dir": str(root / "data"), "workers": 1})
            assert run_chain(["x-prepro", str(config)]) == 0
            done[name] = root / "data"
        return done[name]

    return get


@pytest.fixture(scope="session")
def cnn_run(prepared: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished cls_cnn run on the review sample (several evaluations, so <best> is not <last>)."""
    return train_run(tmp_path_factory.mktemp("cnn_run"), prepared("reviews_char"))
