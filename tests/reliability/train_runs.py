"""Tiny real x-train runs for the reliability tests: cls_cnn on the committed Chinese reviews."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
KILL_RUNNER = REPO / "tests" / "train" / "kill_runner.py"

# 240 training samples: 15 updates of 16 per epoch; evaluation on 60 dev samples.
TINY = {"model": "cls_cnn", "loss": "cross_entropy", "embedding_dim": 16, "num_filters": 8, "kernel_sizes": [2, 3],
        "dropout": 0.1, "batch_size": 16, "learning_rate": 3e-3, "max_update": 6, "eval_interval": 3,
        "major_metric": "accuracy", "log_interval": 2, "lr_scheduler": "linear_decay", "warmup_steps": 2,
        "viz": False}


def train_config(path: Path, data_dir: Any, save_dir: Any, **overrides: Any) -> Path:
    """Write an x-train config for ``save_dir`` (a local path or a URL) and return its path."""
    config = {"__parent__": "${data_dir}/meta", "data_dir": str(data_dir), "save_dir": str(save_dir),
              **TINY, **overrides}
    config = {k: v for k, v in config.items() if v is not ...}  # `key=...` drops a TINY key
    path.write_text(json.dumps(config, indent=1))
    return path


def state_weights(save_dir: Any) -> dict[str, Any]:
    from xdpx.models.checkpoints import load_torch

    return load_torch(f"{save_dir}/state.pt")["model"]


def assert_same_weights(a: dict[str, Any], b: dict[str, Any]) -> None:
    import torch

    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), f"{key} differs"
