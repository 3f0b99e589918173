"""Helpers of the x-submit tests: the tiny training config, x-submit called in-process, run comparison."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from xdpx.submit.main import main as x_submit

REPO = Path(__file__).resolve().parents[2]

# cls_cnn on the 240 committed reviews: 8 updates of 2 x 16 samples, evaluated at updates 5 and 8.
TINY = {
    "model": "cls_cnn", "loss": "cross_entropy", "embedding_dim": 16, "num_filters": 8, "kernel_sizes": [2, 3],
    "dropout": 0.0, "batch_size": 16, "learning_rate": 3e-3, "max_epoch": 1, "eval_interval": 5,
    "major_metric": "accuracy", "lr_scheduler": "linear_decay", "warmup_steps": 0,
}


def write_config(path: Path, data_dir: Path, save_dir: str, **overrides: Any) -> Path:
    config = {"__parent__": "${data_dir}/meta", "data_dir": str(data_dir), "save_dir": save_dir, **TINY, **overrides}
    path.write_text(json.dumps(config, indent=1))
    return path


def submit(monkeypatch: pytest.MonkeyPatch, folder: Path, *argv: str) -> int:
    """x-submit run from ``folder`` (relative paths of the chain are relative to it, as in a shell)."""
    monkeypatch.chdir(folder)
    # The job inherits this environment (--export=ALL): it must import this checkout of xdpx.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    return x_submit(list(argv), interactive=False)


def job_id_from(output: str) -> str:
    match = re.search(r"submitted job (\d+)", output)
    assert match, output
    return match.group(1)


def local_torchrun(folder: Path, config: Path, processes: int = 2) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                             f"--nproc_per_node={processes}", "-m", "xdpx.submit.chain", "x-train", str(config)],
                            cwd=folder, env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]


def assert_same_run(a: Path, b: Path) -> None:
    """Same final weights (bit for bit) and the same validation log."""
    import torch

    from xdpx.models.checkpoints import load_torch

    weights_a, weights_b = load_torch(str(a / "state.pt"))["model"], load_torch(str(b / "state.pt"))["model"]
    assert weights_a.keys() == weights_b.keys()
    for key in weights_a:
        assert torch.equal(weights_a[key], weights_b[key]), f"{key} differs"
    assert (a / "valid.log.tsv").read_text() == (b / "valid.log.tsv").read_text()
