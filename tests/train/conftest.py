"""Fixtures of the x-train tests: real x-prepro output of the committed review samples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xdpx.cli import run_chain

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def reviews(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """x-prepro of examples/data/sample/reviews (char_zh, own vocabulary)."""
    root = tmp_path_factory.mktemp("reviews")
    config = root / "prepro.hjson"
    config.write_text(json.dumps({
        "__parent__": str(REPO / "examples/prepro/reviews_char"),
        "data_source": str(REPO / "examples/data/sample/reviews"), "data_dir": str(root / "data"), "workers": 1,
    }))
    assert run_chain(["x-prepro", str(config)]) == 0
    return root / "data"


@pytest.fixture(autouse=True)
def forget_test_components():
    """The faulty_cnn test model (user_dir) must not stay registered for later tests (e.g. the
    generated option docs check lists every registered model)."""
    yield
    import sys

    from xdpx.models import models

    models._entries.pop("faulty_cnn", None)
    sys.modules.pop("faulty_components", None)
