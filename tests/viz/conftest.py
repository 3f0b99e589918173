"""Fixtures of the x-viz, result-tool and debugging tests: real x-prepro output of the committed review
samples, tiny real training runs, and the test-only components of tests/viz/planted (user_dir)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from viz_helpers import train


@pytest.fixture(scope="session")
def two_runs(reviews: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The same model trained with batch 16 and batch 32 (2 epochs each; every checkpoint kept)."""
    root = tmp_path_factory.mktemp("runs")
    code16, bs16 = train(root, reviews, "bs16", batch_size=16, eval_interval=6, log_interval=2, max_epoch=2)
    code32, bs32 = train(root, reviews, "bs32", batch_size=32, eval_interval=3, log_interval=1, max_epoch=2)
    assert code16 == 0 and code32 == 0
    return bs16, bs32


@pytest.fixture(autouse=True)
def forget_planted_components():
    """The planted test models must not stay registered for later tests (the option docs check lists
    every registered model)."""
    yield
    from xdpx.models import models

    for name in ("planted_nan", "summary_cnn"):
        models._entries.pop(name, None)
    sys.modules.pop("planted", None)
