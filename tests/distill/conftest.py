"""Fixtures of the distillation tests: the committed polarity sample (English, label first), a tiny TextCNN
teacher trained on it, the teacher's logits written by x-pred (distill: true) and read back by x-prepro."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from xdpx.cli import run_chain

REPO = Path(__file__).resolve().parents[2]
POLARITY = REPO / "examples/data/sample/polarity"

# tiny and fast, still the real model
CNN = {"model": "cls_cnn", "embedding_dim": 16, "num_filters": 8, "kernel_sizes": [2, 3], "dropout": 0.1,
       "batch_size": 16, "learning_rate": 3e-3, "eval_interval": 10, "major_metric": "accuracy", "log_interval": 2,
       "lr_scheduler": "linear_decay", "warmup_steps": 2, "optimizer": "adam"}


def write_json(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(json.dumps(config, indent=1))
    return path


def run(command: str, path: Path, config: dict[str, Any]) -> None:
    assert run_chain([command, str(write_json(path, config))]) == 0


def student_config(root: Path, data_dir: Path, save_dir: Path, **overrides: Any) -> Path:
    config = {"__parent__": "${data_dir}/meta", "data_dir": str(data_dir), "save_dir": str(save_dir), **CNN,
              "task": "distill", "loss": "distill", "temperature": 2.0, "alpha": 0.3, "max_update": 12,
              "train_subset": "train", **overrides}
    return write_json(root / f"{save_dir.name}.hjson", config)


@pytest.fixture(scope="session")
def distill_data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """teacher_data (processor single, max_len 48), teacher (a trained cls_cnn run), scored (x-pred's logits
    for train.txt), student_data (single_with_logits + keep_texts, max_len 64: not the teacher's input)."""
    root = tmp_path_factory.mktemp("distill")
    words = {"parser": "csv", "loader": "single", "text_column": 1, "label_column": 0, "tokenizer": "space",
             "workers": 1}
    run("x-prepro", root / "teacher_prepro.hjson", {**words, "data_source": str(POLARITY),
                                                    "data_dir": str(root / "teacher_data"), "processor": "single",
                                                    "max_len": 48})
    run("x-train", root / "teacher.hjson", {"__parent__": "${data_dir}/meta", "data_dir": str(root / "teacher_data"),
                                            "save_dir": str(root / "teacher"), **CNN, "loss": "cross_entropy",
                                            "max_epoch": 1, "save_last_only": True})
    scored = root / "scored"
    run("x-pred", root / "score.hjson", {"save_dir": str(root / "teacher"), "distill": True, "header": False,
                                         "concat_origin": True,
                                         "predict_file_map": {str(POLARITY / "train.txt"): str(scored / "train.txt")}})
    run("x-prepro", root / "student_prepro.hjson", {
        **words, "data_source": str(root), "data_dir": str(root / "student_data"),
        "data_files": {"scored/train.txt": "train", str(POLARITY / "dev.txt"): "dev"},
        "processor": "single_with_logits", "loader": "single_with_logits", "num_logits": 2, "keep_texts": True,
        "max_len": 64, "target_map_file": str(root / "teacher_data/target_map.txt")})
    return {"root": root, "teacher_data": root / "teacher_data", "teacher": root / "teacher", "scored": scored,
            "student_data": root / "student_data"}
