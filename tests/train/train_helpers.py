"""Helpers of the x-train tests (fixtures are in conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from xdpx.cli import run_chain

FAULTY = Path(__file__).resolve().parent / "faulty_components"
REPO = Path(__file__).resolve().parents[2]


def run_killable(config: Path, where: str = "never", n: int = 0) -> int:
    """x-train of ``config`` in its own process, killed (SIGKILL) at the n-th ``where`` of
    tests/train/kill_runner.py ('never': runs to the end). The exit code (-9 when killed)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, str(REPO / "tests/train/kill_runner.py"), str(config), where, str(n)],
                          capture_output=True, timeout=300, env=env).returncode

# A small, fast, still real configuration: cls_cnn on 240 Chinese reviews (60 in dev).
BASE = {
    "model": "cls_cnn", "loss": "cross_entropy", "embedding_dim": 16, "num_filters": 8, "kernel_sizes": [2, 3],
    "dropout": 0.1, "batch_size": 16, "learning_rate": 3e-3, "max_epoch": 3, "eval_interval": 10,
    "major_metric": "accuracy", "log_interval": 4, "lr_scheduler": "linear_decay", "warmup_steps": 5,
}


def write_config(path: Path, data_dir: Path, save_dir: Path, base: dict[str, Any] | None = None,
                 **overrides: Any) -> Path:
    """An x-train config: ``base`` (BASE when None), then ``overrides``; ``key=...`` drops a key of the base."""
    config = {"__parent__": "${data_dir}/meta", "data_dir": str(data_dir), "save_dir": str(save_dir),
              **(BASE if base is None else base), **overrides}
    config = {k: v for k, v in config.items() if v is not ...}
    path.write_text(json.dumps(config, indent=1))
    return path


def train(path: Path) -> int:
    return run_chain(["x-train", str(path)])


def final_weights(save_dir: Path) -> dict[str, Any]:
    from xdpx.models.checkpoints import load_torch

    return load_torch(str(save_dir / "state.pt"))["model"]


def assert_same_weights(a: dict[str, Any], b: dict[str, Any]) -> None:
    import torch

    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), f"{key} differs"


def assert_same_run(run: Path, reference: Path) -> None:
    """Weights, valid.log.tsv, the train.log.tsv rows, checkpoints.json and the checkpoint files alike."""
    assert_same_weights(final_weights(run), final_weights(reference))
    assert (run / "valid.log.tsv").read_text() == (reference / "valid.log.tsv").read_text()
    expected_rows = [line.split("\t")[:4] for line in (reference / "train.log.tsv").read_text().splitlines()]
    assert [line.split("\t")[:4] for line in (run / "train.log.tsv").read_text().splitlines()] == expected_rows
    assert (run / "checkpoints.json").read_text() == (reference / "checkpoints.json").read_text()
    assert sorted(p.name for p in run.glob("checkpoint-*.pt")) == sorted(p.name for p in reference.glob("checkpoint-*.pt"))
