"""Helpers of the inference tests (fixtures are in conftest.py): sample data configs, a tiny training run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from xdpx.cli import run_chain

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples/data/sample"
CHINESE_VOCAB = str(SAMPLE / "vocab/chinese_vocab.txt")

# name -> x-prepro config of a committed sample (parents are the example configs).
PREPRO = {
    "reviews_char": {"__parent__": str(REPO / "examples/prepro/reviews_char"), "data_source": str(SAMPLE / "reviews")},
    "stsb_pair": {"__parent__": str(REPO / "examples/prepro/stsb_pair"), "data_source": str(SAMPLE / "stsb")},
    "reviews_bert": {"__parent__": str(REPO / "examples/prepro/reviews_bert"), "data_source": str(SAMPLE / "reviews"),
                     "vocab_file": CHINESE_VOCAB},
    "stsb_bert": {"__parent__": str(REPO / "examples/prepro/stsb_bert"), "data_source": str(SAMPLE / "stsb"),
                  "vocab_file": CHINESE_VOCAB},
    "peoples_daily_mlm": {"__parent__": str(REPO / "examples/prepro/peoples_daily_mlm"),
                          "data_source": str(SAMPLE / "peoples_daily"), "vocab_file": CHINESE_VOCAB},
    "peoples_daily_ner": {"__parent__": str(REPO / "examples/ner/prepro_char"), "data_source": str(REPO / "examples/ner/data"),
                          "data_files": "*.conll", "max_len": 128},
    "peoples_daily_ner_bert": {"__parent__": str(REPO / "examples/ner/prepro_bert"), "vocab_file": CHINESE_VOCAB,
                               "data_source": str(REPO / "examples/ner/data"), "data_files": "*.conll", "max_len": 128},
    "stsb_bi_encoder": {"__parent__": str(REPO / "examples/retrieval/prepro_stsb_bert"), "data_source": str(SAMPLE / "stsb"),
                        "vocab_file": CHINESE_VOCAB},
    "stsb_words_bi_encoder": {"__parent__": str(REPO / "examples/prepro/stsb_pair"), "data_source": str(SAMPLE / "stsb"),
                              "processor": "bi_encoder"},
}

# A small, fast, still real training configuration: cls_cnn on 240 Chinese reviews (60 in dev).
CNN_RUN = {
    "model": "cls_cnn", "loss": "cross_entropy", "embedding_dim": 16, "num_filters": 8, "kernel_sizes": [2, 3],
    "dropout": 0.1, "batch_size": 16, "valid_batch_size": 7, "learning_rate": 3e-3, "max_epoch": 2,
    "eval_interval": 5, "major_metric": "accuracy", "log_interval": 4,
}


def write_json(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(json.dumps(config, ensure_ascii=False, indent=1), encoding="utf-8")
    return path


def train_run(root: Path, data_dir: Path, **overrides: Any) -> Path:
    config = {"__parent__": "${data_dir}/meta", "data_dir": str(data_dir), "save_dir": str(root / "run"),
              **CNN_RUN, **overrides}
    config = {k: v for k, v in config.items() if v is not ...}  # `key=...` drops a CNN_RUN key
    assert run_chain(["x-train", str(write_json(root / "train.hjson", config))]) == 0
    return root / "run"
