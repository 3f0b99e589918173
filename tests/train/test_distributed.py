"""Two processes (torchrun, gloo on the CPU) make the same updates as one process with the whole batch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch
from train_helpers import final_weights, train, write_config

RUNNER = Path(__file__).resolve().parent / "kill_runner.py"


def test_two_processes_equal_one_process_with_the_effective_batch(reviews, tmp_path):
    common = {"dropout": 0.0, "max_epoch": 1, "eval_interval": 5, "warmup_steps": 0}
    # 240 samples in updates of 2 x 16 = 32: the last update (16 samples) gives each rank 8
    config = write_config(tmp_path / "ddp.hjson", reviews, tmp_path / "ddp", **common, batch_size=16)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                             "--standalone", str(RUNNER), str(config), "never", "0"],
                            capture_output=True, text=True, timeout=180, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert train(write_config(tmp_path / "one.hjson", reviews, tmp_path / "one", **common, batch_size=32)) == 0
    expected = final_weights(tmp_path / "one")
    for key, value in final_weights(tmp_path / "ddp").items():
        assert torch.allclose(value, expected[key], rtol=1e-4, atol=1e-6), key
    ddp_rows = (tmp_path / "ddp" / "valid.log.tsv").read_text().splitlines()
    assert [r.split("\t")[:3] for r in ddp_rows] == \
        [r.split("\t")[:3] for r in (tmp_path / "one" / "valid.log.tsv").read_text().splitlines()]
