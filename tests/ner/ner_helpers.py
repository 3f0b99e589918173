"""Helpers of the NER tests: the committed People's Daily sample (examples/ner/data), tiny configs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from xdpx.cli import run_chain

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples/ner/data"
CHINESE_VOCAB = str(REPO / "examples/data/sample/vocab/chinese_vocab.txt")

# a real, small configuration: BiLSTM-CRF with 16-dim embeddings on 300 sentences, 3 evaluations
LSTM = {"task": "ner", "model": "lstm_ner", "crf": True, "loss": "token_cross_entropy", "embedding_dim": 16,
        "hidden_size": 16, "dropout": 0.1, "batch_size": 32, "learning_rate": 0.1, "max_update": 18,
        "eval_interval": 6, "valid_subset": "dev", "major_metric": "entity_f1", "log_interval": 3,
        "lr_scheduler": "linear_decay", "warmup_steps": 2, "save_best_only": True, "save_last_only": True}


def write_json(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(json.dumps(config, ensure_ascii=False, indent=1), encoding="utf-8")
    return path


def prepro(root: Path, **overrides: Any) -> Path:
    """x-prepro of the committed sample (character units, BIO, at most 64 per sentence) into root/data."""
    config = {"__parent__": str(REPO / "examples/ner/prepro_char"), "data_source": str(SAMPLE),
              "data_files": "*.conll", "data_dir": str(root / "data"), "workers": 1, "max_len": 64, **overrides}
    assert run_chain(["x-prepro", str(write_json(root / "prepro.hjson", config))]) == 0
    return root / "data"


def train_config(path: Path, data_dir: Path, save_dir: Path, **overrides: Any) -> Path:
    config = {"__parent__": "${data_dir}/meta", "data_dir": str(data_dir), "save_dir": str(save_dir), **LSTM,
              **overrides}
    return write_json(path, {k: v for k, v in config.items() if v is not ...})


def read_tsv(path: Path) -> list[dict[str, str]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    names = lines[0].split("\t")
    return [dict(zip(names, line.split("\t"))) for line in lines[1:]]
