"""Fixtures of the LoRA / layer-group tests: the committed review sample prepared for BERT (x-prepro), and
a tiny BERT fine-tuned on it by x-train that plays the pretrained model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bert.conftest import REPO, SAMPLES, TINY_BERT, prepro
from xdpx.cli import run_chain

COMMON = {**TINY_BERT, "batch_size": 16, "learning_rate": 1e-3, "max_update": 6, "eval_interval": 3,
          "log_interval": 3, "seed": 3, "model": "bert_classification", "loss": "cross_entropy",
          "major_metric": "accuracy"}


def train(root: Path, data_dir: Path, name: str, **config: object) -> Path:
    save_dir = root / name
    path = root / f"{name}.hjson"
    path.write_text(json.dumps({"__parent__": "${data_dir}/meta", "data_dir": str(data_dir),
                                "save_dir": str(save_dir), **COMMON, **config}))
    assert run_chain(["x-train", str(path)]) == 0
    return save_dir


@pytest.fixture(scope="session")
def reviews(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bert_single over the Chinese review sample (2 classes), max_len 64."""
    return prepro(tmp_path_factory.mktemp("lora_data"), "reviews",
                  __parent__=str(REPO / "examples/prepro/reviews_bert"), __ignore__=["threshold"],
                  data_source=str(SAMPLES / "reviews"), max_len=64)


@pytest.fixture(scope="session")
def pretrained(reviews: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny BERT trained 6 updates on the reviews: the `pretrained_model` the tests start from."""
    return train(tmp_path_factory.mktemp("lora_pretrained"), reviews, "base") / "<last>"
