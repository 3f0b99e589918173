"""Fixtures of the export tests: real x-prepro output of the committed samples and tiny trained runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from xdpx.cli import run_chain

REPO = Path(__file__).resolve().parents[2]


def prepro(root: Path, parent: str, sample: str, **overrides: Any) -> Path:
    config = root / "prepro.hjson"
    config.write_text(json.dumps({"__parent__": str(REPO / "examples/prepro" / parent),
                                  "data_source": str(REPO / "examples/data/sample" / sample),
                                  "data_dir": str(root / "data"), "workers": 1, **overrides}))
    assert run_chain(["x-prepro", str(config)]) == 0
    return root / "data"


def train_run(root: Path, data_dir: Path, **config: Any) -> Path:
    """A few updates of a tiny model: enough for real weights, fast enough for the test run."""
    save_dir = root / f"run_{config['model']}"
    path = root / f"train_{config['model']}.hjson"
    path.write_text(json.dumps({"__parent__": "${data_dir}/meta", "data_dir": str(data_dir),
                                "save_dir": str(save_dir), "batch_size": 16, "max_update": 4, "eval_interval": 4,
                                "learning_rate": 3e-3, "log_interval": 3, **config}))
    assert run_chain(["x-train", str(path)]) == 0
    return save_dir


@pytest.fixture(scope="session")
def reviews_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """x-prepro of examples/data/sample/reviews: characters, own vocabulary, labels pos/neg (64 tokens at
    most, to keep the tests fast)."""
    return prepro(tmp_path_factory.mktemp("reviews"), "reviews_char", "reviews", max_len=64)


@pytest.fixture(scope="session")
def stsb_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """x-prepro of examples/data/sample/stsb: sentence pairs, scores 0-5 as regression."""
    return prepro(tmp_path_factory.mktemp("stsb"), "stsb_pair", "stsb", data_files={
        "train.tsv": "train", "dev.tsv": "dev", "test.tsv": "test"})


TINY = {
    "cls_cnn": {"model": "cls_cnn", "embedding_dim": 16, "loss": "cross_entropy", "num_filters": 8, "kernel_sizes": [2, 3],
                "major_metric": "accuracy"},
    "cls_lstm": {"model": "cls_lstm", "embedding_dim": 16, "loss": "cross_entropy", "hidden_size": 12, "major_metric": "accuracy"},
    "match_cnn": {"model": "match_cnn", "embedding_dim": 16, "loss": "mse", "hidden_size": 12, "major_metric": "pearson"},
    "re2": {"model": "re2", "embedding_dim": 16, "loss": "mse", "hidden_size": 12, "blocks": 2, "major_metric": "pearson"},
}


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory, reviews_data: Path, stsb_data: Path):
    """``trained(name) -> save_dir`` of a tiny run of that model (trained once per session)."""
    runs: dict[str, Path] = {}
    root = tmp_path_factory.mktemp("runs")

    def get(name: str) -> Path:
        if name not in runs:
            data = reviews_data if name.startswith("cls_") else stsb_data
            runs[name] = train_run(root, data, **TINY[name])
        return runs[name]

    return get


VOCAB = str(REPO / "examples/data/sample/vocab/chinese_vocab.txt")  # bert-base-chinese's vocabulary
TINY_BERT = {"pretrained_model": None, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
             "intermediate_size": 32, "max_position_embeddings": 64}


@pytest.fixture(scope="session")
def bert_trained(tmp_path_factory: pytest.TempPathFactory):
    """``bert_trained(name) -> save_dir``: tiny bert_classification (reviews, 2 classes), bert_pair or
    bert_siamese (STS-B sample, regression), bert_lm or bert_pretrain (People's Daily sample), trained a few
    updates, once per session."""
    runs: dict[str, Path] = {}
    data_dirs: dict[str, Path] = {}
    root = tmp_path_factory.mktemp("bert_runs")
    setups = {"bert_classification": ("reviews_bert", "reviews", "cross_entropy", "accuracy"),
              "bert_pair": ("stsb_bert", "stsb", "mse", "pearson"),
              "bert_siamese": ("stsb_bert", "stsb", "mse", "pearson"),
              "bert_lm": ("peoples_daily_mlm", "peoples_daily", "mlm", "mlm_accuracy"),
              "bert_pretrain": ("peoples_daily_mlm", "peoples_daily", "mlm_sop", "mlm_accuracy")}

    def get(name: str) -> Path:
        if name not in runs:
            parent, sample, loss, metric = setups[name]
            extra = {"__ignore__": ["threshold"]} if sample == "reviews" else {}
            if name == "bert_pretrain":
                extra["processor"] = "bert_pretrain"
            key = f"{parent}-{extra.get('processor', '')}"
            if key not in data_dirs:
                folder = root / f"data_{len(data_dirs)}"
                folder.mkdir()
                data_dirs[key] = prepro(folder, parent, sample, vocab_file=VOCAB, max_len=48, **extra)
            runs[name] = train_run(root, data_dirs[key], model=name, loss=loss, major_metric=metric, **TINY_BERT)
        return runs[name]

    return get
