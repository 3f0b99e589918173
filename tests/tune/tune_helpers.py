"""Helpers of the x-tune tests: a tiny cls_cnn base config on the committed review sample, a small space
and tune.hjson; x-tune run in-process (its trials are real x-train processes) or as a process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from xdpx.cli import run_chain

REPO = Path(__file__).resolve().parents[2]

BASE = {
    "model": "cls_cnn", "loss": "cross_entropy", "embedding_dim": 16, "num_filters": 8, "kernel_sizes": [2, 3],
    "dropout": 0.1, "batch_size": 16, "learning_rate": 3e-3, "max_update": 16, "major_metric": "accuracy",
    "log_interval": 4, "viz": False,
}
SPACE = {
    "learning_rate": {"type": "float", "values": [1e-3, 3e-2], "log": True},
    "num_filters": {"type": "int", "values": [4, 12], "step": 4},
    "dropout": {"type": "categorical", "values": [0.0, 0.2]},
}


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data, indent=1))
    return path


def write_study(root: Path, data_dir: Path, space: dict[str, Any] | None = None,
                base: dict[str, Any] | None = None, **tune: Any) -> Path:
    """train.hjson, space.hjson and tune.hjson in ``root`` (relative names, as the original XDPX's manual writes them)."""
    root.mkdir(parents=True, exist_ok=True)
    write_json(root / "train.hjson", {"__parent__": "${data_dir}/meta", "data_dir": str(data_dir),
                                      "save_dir": str(root / "unused"), **BASE, **(base or {})})
    write_json(root / "space.hjson", SPACE if space is None else space)
    config = {"space_config": "./space", "base_config": "./train", "save_dir": str(root / "study"),
              "tuner": "random", "assess_start_step": 4, "assess_interval": 4, "parallel_runs": 2,
              "max_trials": 4, "heartbeat_interval": 2, **tune}
    return write_json(root / "tune.hjson", {k: v for k, v in config.items() if v is not ...})


def tune(path: Path, *flags: str) -> int:
    return run_chain(["x-tune", str(path), *flags])


def tune_process(path: Path, *flags: str) -> subprocess.Popen:
    """x-tune as its own process (the console script may not be installed yet: call the entry point)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-c", "from xdpx.cli import x_tune; x_tune()", str(path), *flags],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def load_study(save_dir: Path, storage: str | None = None) -> Any:
    import optuna

    return optuna.load_study(study_name="x-tune", storage=storage or f"sqlite:///{save_dir / 'study.db'}")


def trial_starts(save_dir: Path) -> dict[int, int]:
    """How many times each trial folder's x-train started training (log.txt lines)."""
    counts = {}
    for folder in sorted(save_dir.glob("trial_*")):
        log = folder / "log.txt"
        text = log.read_text() if log.exists() else ""
        counts[int(folder.name.split("_")[1])] = text.count("| training cls_cnn on ")
    return counts
