"""Fixtures of the x-viz, result-tool and debugging tests: real x-prepro output of the committed review
samples, tiny real training runs, and the test-only components of tests/viz/planted (user_dir)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from xdpx.cli import run_chain

REPO = Path(__file__).resolve().parents[2]
PLANTED = Path(__file__).resolve().parent / "planted"

# cls_cnn on 240 Chinese reviews (60 in dev): 15 updates of 16 samples per epoch.
TINY = {"model": "cls_cnn", "loss": "cross_entropy", "embedding_dim": 16, "num_filters": 8, "kernel_sizes": [2, 3],
        "dropout": 0.1, "batch_size": 16, "learning_rate": 3e-3, "max_epoch": 3, "eval_interval": 5,
        "major_metric": "accuracy", "log_interval": 2, "lr_scheduler": "linear_decay", "warmup_steps": 5,
        "viz": False}


def write_train_config(path: Path, data_dir: Path, save_dir: Path, **overrides: Any) -> Path:
    config = {"__parent__": "${data_dir}/meta", "data_dir": str(data_dir), "save_dir": str(save_dir),
              **TINY, **overrides}
    path.write_text(json.dumps(config, indent=1))
    return path


def train(root: Path, data_dir: Path, name: str, **overrides: Any) -> tuple[int, Path]:
    """x-train a tiny run into root/name; (exit code, save_dir)."""
    save_dir = root / name
    code = run_chain(["x-train", str(write_train_config(root / f"{name}.hjson", data_dir, save_dir, **overrides))])
    return code, save_dir


def read_rows(path: Path) -> list[dict[str, str]]:
    lines = path.read_text().splitlines()
    header = lines[0].split("\t")
    return [dict(zip(header, line.split("\t"))) for line in lines[1:]]


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
