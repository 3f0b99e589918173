"""Helpers of the x-viz, result-tool and debugging tests (fixtures are in conftest.py): tiny real
training runs and reading their tsv logs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


def png_pixels(path: Path) -> Any:
    """The RGB pixels of a PNG (height x width x 3, floats in [0, 1]), read back with matplotlib."""
    from matplotlib.image import imread

    return imread(str(path))[..., :3]


def pixels_of_color(pixels: Any, color: str, tolerance: float = 0.04, alpha: float = 1.0) -> int:
    """How many pixels are ``color`` ('#rrggbb', drawn with ``alpha`` over white), each channel within
    ``tolerance``: the solid middle of a line or marker (its antialiased edges are blends and do not count)."""
    import numpy as np

    rgb = 1 - alpha * (1 - np.array([int(color[i: i + 2], 16) / 255 for i in (1, 3, 5)]))
    return int((np.abs(pixels - rgb) <= tolerance).all(axis=-1).sum())
