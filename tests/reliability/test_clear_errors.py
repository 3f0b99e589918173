"""One clear message, never a traceback, for checkpoints that cannot be used and for configs that cannot run:
a code-carrying or corrupt checkpoint, a resume with another model or optimizer, a missing user_dir; a
warning when warmup is longer than the run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from train_runs import train_config


class RunsCode:
    """Unpickling this would run ``touch`` (a malicious checkpoint); weights_only loading must refuse it."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (os.system, (f"touch {self.marker}",))


def assert_one_clear_line(out: str, *expected: str) -> None:
    assert "Traceback" not in out, out
    assert "weights_only=False" not in out and "weights_only` set to `False" not in out, out
    for text in expected:
        assert text in out, out


@pytest.fixture(scope="module")
def trained(reviews, tmp_path_factory) -> Path:
    """One finished tiny run (6 updates) that the tests below damage copies of or resume."""
    from xdpx.cli import run_chain

    root = tmp_path_factory.mktemp("trained")
    assert run_chain(["x-train", str(train_config(root / "t.hjson", reviews, root / "run"))]) == 0
    return root / "run"


def test_a_checkpoint_that_carries_code_is_refused_and_never_runs(reviews, trained, tmp_path, cli):
    marker = tmp_path / "code-ran"
    evil = tmp_path / "evil.pt"
    torch.save({"weight": RunsCode(marker)}, evil)
    code, out = cli("x-train", train_config(tmp_path / "t.hjson", reviews, tmp_path / "run", pretrained_model=str(evil)))
    assert code == 1
    assert_one_clear_line(out, f"{evil} is refused as a checkpoint", "posix.system, which is code, not weights")
    assert not marker.exists()
    eval_config = tmp_path / "eval.hjson"
    eval_config.write_text(json.dumps({"save_dir": str(trained), "checkpoint": str(evil), "valid_subset": "dev"}))
    code, out = cli("x-eval", eval_config)
    assert code == 1
    assert_one_clear_line(out, "is refused as a checkpoint")
    assert not marker.exists()


@pytest.mark.parametrize("damage", ["truncated", "empty", "text"])
def test_a_corrupt_state_is_one_message_with_the_path(reviews, trained, tmp_path, cli, damage):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(trained, run)
    data = (run / "state.pt").read_bytes()
    (run / "state.pt").write_bytes({"truncated": data[: len(data) // 3], "empty": b"", "text": b"hello\n"}[damage])
    code, out = cli("x-train", train_config(tmp_path / "t.hjson", reviews, run, resume=True, max_update=9))
    assert code == 1
    assert_one_clear_line(out, f"{run / 'state.pt'} is not a readable checkpoint")


@pytest.mark.parametrize("change,expected", [
    ({"embedding_dim": 24}, "another model or shape than this config builds (shapes differ: "),
    ({"model": "cls_lstm", "hidden_size": 8, "num_filters": ..., "kernel_sizes": ...}, "another model or shape"),
    ({"optimizer": "sgd"}, "saved with another optimizer"),
])
def test_resume_with_another_model_or_optimizer(reviews, trained, tmp_path, cli, change, expected):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(trained, run)
    before = (run / "state.pt").read_bytes()
    config = train_config(tmp_path / "t.hjson", reviews, run, resume=True, max_update=9, **change)
    code, out = cli("x-train", config)
    assert code == 1
    assert_one_clear_line(out, "resume:", expected, "starter_config.hjson")
    assert (run / "state.pt").read_bytes() == before  # nothing written over the run


def test_a_missing_user_dir_is_a_config_error(reviews, tmp_path, cli):
    config = train_config(tmp_path / "t.hjson", reviews, tmp_path / "run", user_dir=str(tmp_path / "no_such_pkg"))
    code, out = cli("x-train", config, "--dry")
    assert code == 2
    assert_one_clear_line(out, f"{config}: key 'user_dir'", "no_such_pkg", "is not a directory")
    assert not (tmp_path / "run").exists()


def test_warmup_longer_than_the_run_is_warned(reviews, tmp_path, cli):
    config = train_config(tmp_path / "t.hjson", reviews, tmp_path / "run", warmup_steps=10, max_update=4)
    code, out = cli("x-train", config, "--dry")
    assert code == 0 and "warning: warmup_steps (10) exceeds max_update (4)" in out
    code, out = cli("x-train", config)
    assert code == 0
    assert "warning: warmup_steps (10) exceeds the run's 4 updates" in (tmp_path / "run" / "log.txt").read_text()
