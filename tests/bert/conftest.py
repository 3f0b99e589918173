"""Fixtures of the BERT tests: real x-prepro output of the committed samples with the Chinese BERT
vocabulary (examples/data/sample/vocab), and a tiny random BERT configuration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xdpx.cli import run_chain

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "examples/data/sample"
VOCAB = str(SAMPLES / "vocab/chinese_vocab.txt")

# Small enough for a few CPU steps in about a second, still every part of BERT.
TINY_BERT = {"pretrained_model": None, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
             "intermediate_size": 64, "max_position_embeddings": 128}


def prepro(root: Path, name: str, **config: object) -> Path:
    path = root / f"{name}.hjson"
    config = {"data_dir": str(root / name), "workers": 1, "vocab_file": VOCAB, "tokenizer": "bert", **config}
    path.write_text(json.dumps(config))
    assert run_chain(["x-prepro", str(path)]) == 0
    return root / name


@pytest.fixture(scope="session")
def reviews_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bert_single over the Chinese review sample (2 classes)."""
    return prepro(tmp_path_factory.mktemp("bert"), "reviews", __parent__=str(REPO / "examples/prepro/reviews_bert"),
                  __ignore__=["threshold"], data_source=str(SAMPLES / "reviews"), max_len=64)


@pytest.fixture(scope="session")
def stsb_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bert_pair over the STS-B sample as regression (English through the Chinese vocabulary's pieces)."""
    return prepro(tmp_path_factory.mktemp("bert"), "stsb", __parent__=str(REPO / "examples/prepro/stsb_bert"),
                  data_source=str(SAMPLES / "stsb"), max_len=64)


@pytest.fixture(scope="session")
def daily_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bert_lm blocks of People's Daily (sample), whole-word masks by jieba when it is installed."""
    return prepro(tmp_path_factory.mktemp("bert"), "daily_lm",
                  __parent__=str(REPO / "examples/prepro/peoples_daily_mlm"),
                  data_source=str(SAMPLES / "peoples_daily"), max_len=64)


@pytest.fixture(scope="session")
def daily_pretrain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bert_pretrain (MLM + sentence order) blocks of People's Daily (sample)."""
    return prepro(tmp_path_factory.mktemp("bert"), "daily_pretrain",
                  __parent__=str(REPO / "examples/prepro/peoples_daily_mlm"), processor="bert_pretrain",
                  data_source=str(SAMPLES / "peoples_daily"), max_len=64)
