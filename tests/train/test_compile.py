"""compile: true (torch.compile, inductor) on a tiny cls_cnn: the same training as eager within float
tolerance, the same checkpoint keys, an exact resume, x-eval compiled; and the eager fallback when no
C++ compiler is found. Compiling is slow on a CPU (tens of seconds per graph): one tiny model, 3 updates."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.train.train_helpers import BASE
from xdpx.cli import run_chain
from xdpx.runtime.compiling import why_not_compilable

REPO = Path(__file__).resolve().parents[2]

# dropout 0: compiled code draws its random numbers differently from eager code
CONFIG = {**BASE, "dropout": 0.0, "max_epoch": None, "max_update": 3, "eval_interval": -1, "log_interval": 1,
          "viz": False}


@pytest.fixture(autouse=True)
def restore_torch_modes():
    """compile: true switches torch's deterministic mode on for the process: leave it as it was."""
    from torch import _dynamo

    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
              torch.utils.deterministic.fill_uninitialized_memory, _dynamo.config.suppress_errors)
    yield
    torch.use_deterministic_algorithms(before[0], warn_only=before[1])
    torch.utils.deterministic.fill_uninitialized_memory = before[2]
    _dynamo.config.suppress_errors = before[3]


def train(tmp_path: Path, data_dir: Path, name: str, **config: Any) -> Path:
    save_dir = tmp_path / name
    path = tmp_path / f"{name}.hjson"
    path.write_text(json.dumps({"__parent__": "${data_dir}/meta", "data_dir": str(data_dir),
                                "save_dir": str(save_dir), **CONFIG, **config}))
    assert run_chain(["x-train", str(path)]) == 0
    return save_dir


def train_fresh(tmp_path: Path, data_dir: Path, name: str, **config: Any) -> Path:
    """x-train in a fresh Python process (compiled kernels and floating-point state of its own)."""
    save_dir = tmp_path / name
    path = tmp_path / f"{name}.{len(list(tmp_path.glob(name + '.*.hjson')))}.hjson"
    path.write_text(json.dumps({"__parent__": "${data_dir}/meta", "data_dir": str(data_dir),
                                "save_dir": str(save_dir), **CONFIG, **config}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", "import sys; from xdpx.cli import run_chain; "
                           f"sys.exit(run_chain(['x-train', {str(path)!r}]))"], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return save_dir


def state(save_dir: Path) -> dict[str, Any]:
    from xdpx.models.checkpoints import load_torch

    return load_torch(str(save_dir / "state.pt"))


def last_eval(save_dir: Path) -> dict[str, str]:
    with open(save_dir / "valid.log.tsv") as f:
        return list(csv.DictReader(f, delimiter="\t"))[-1]


@pytest.mark.slow
@pytest.mark.skipif(why_not_compilable() is not None, reason="torch.compile cannot run here")
def test_compiled_training_matches_eager_resumes_exactly_and_evaluates(tmp_path, reviews):
    eager = train(tmp_path, reviews, "eager")
    compiled = train(tmp_path, reviews, "compiled", compile=True)
    a, b = state(eager)["model"], state(compiled)["model"]
    assert a.keys() == b.keys() and not any("_orig_mod" in key for key in b)  # checkpoints load either way
    for key in a:
        torch.testing.assert_close(b[key], a[key], rtol=1e-4, atol=1e-5, msg=key)
    assert abs(float(last_eval(compiled)["loss"]) - float(last_eval(eager)["loss"])) < 1e-4

    # the exactness of resume between fresh processes, as after a kill: nothing compiled by one process is
    # reused by the next (and the pytest process, which loaded every other test's libraries, is left out)
    straight_run = train_fresh(tmp_path, reviews, "straight", compile=True)
    paused = train_fresh(tmp_path, reviews, "resumed", compile=True, train_steps=1)
    assert state(paused)["counters"]["num_updates"] == 1
    train_fresh(tmp_path, reviews, "resumed", compile=True, resume=True)
    resumed = tmp_path / "resumed"
    straight, again = state(straight_run)["model"], state(resumed)["model"]
    assert [key for key in straight if not torch.equal(straight[key], again[key])] == []

    config = tmp_path / "eval.hjson"
    config.write_text(json.dumps({"save_dir": str(compiled), "valid_subset": "dev", "compile": True,
                                  "save_to_file": str(tmp_path / "eval.tsv")}))
    assert run_chain(["x-eval", str(config)]) == 0
    with open(tmp_path / "eval.tsv") as f:
        row = list(csv.DictReader(f, delimiter="\t"))[-1]
    assert abs(float(row["loss"]) - float(last_eval(compiled)["loss"])) < 1e-5


def test_without_a_compiler_compile_warns_once_and_runs_eagerly(monkeypatch):
    from torch._inductor import config

    from xdpx.runtime import compiling

    monkeypatch.setattr(config.cpp, "cxx", ("/nonexistent/c++",))
    monkeypatch.setattr(compiling, "_warned", set())
    said: list[str] = []
    module = torch.nn.Linear(3, 2)
    assert compiling.compile_module(module, said.append) is False
    assert compiling.compile_module(torch.nn.Linear(3, 2), said.append) is False
    assert len(said) == 1 and "no C++ compiler found" in said[0] and "runs eagerly" in said[0]
    assert "/nonexistent/c++" in said[0] and "CXX" in said[0]
    assert module._compiled_call_impl is None  # eager: nothing wraps the forward
    x = torch.randn(4, 3)
    torch.testing.assert_close(module(x), x @ module.weight.T + module.bias, rtol=0, atol=0)
