"""The NaN detector: a planted NaN source is named by its module, in the forward or the backward pass,
and under fp16 once the loss scale reached its floor."""

from __future__ import annotations

import re

import pytest
import torch
from viz_helpers import PLANTED, train

from xdpx.debug.nan_detector import NanDetector

PLANTED_NAN = {"user_dir": str(PLANTED), "model": "planted_nan", "nan_after_calls": 3, "dropout": 0.0}


def test_a_planted_forward_nan_is_located_by_module_name(reviews, tmp_path, capsys):
    code, run = train(tmp_path, reviews, "run", **PLANTED_NAN)
    assert code == 1
    err = capsys.readouterr().err
    assert "the loss is nan at update 4" in err
    assert "NaN detector: nan first appeared in the forward output of module 'poison' (Poison (its inputs were " \
           "finite))" in err
    assert re.search(r"first parameter with a non-finite gradient: 'classifier\.(weight|bias)' \(nan\)", err)
    assert "NaN detector at update 4: nan first appeared in the forward output of module 'poison'" in \
        (run / "log.txt").read_text()


def test_a_nan_made_in_the_backward_pass_is_located_by_module_name(reviews, tmp_path, capsys):
    code, _ = train(tmp_path, reviews, "run", **PLANTED_NAN, nan_in="backward")
    assert code == 1
    err = capsys.readouterr().err
    assert "the gradient norm is nan at update 4" in err
    assert "the forward pass was finite; nan first appeared in the backward of module 'norm_guard'" in err


def test_fp16_runs_the_detector_once_the_loss_scale_reached_its_floor(reviews, tmp_path, capsys):
    code, run = train(tmp_path, reviews, "run", **PLANTED_NAN, fp16=True, fp16_init_scale=4, min_loss_scale=1.0,
                      max_epoch=1)
    assert code == 1
    err = capsys.readouterr().err
    assert "min_loss_scale" in err and "module 'poison'" in err
    log = (run / "log.txt").read_text()
    assert "loss scale -> 2" in log and "loss scale -> 1" in log  # overflows skipped before the floor


def test_detector_hooks_are_removed_and_a_clean_pass_reports_nothing():
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh())
    with NanDetector(model) as detector:
        model(torch.randn(4, 3, requires_grad=True)).sum().backward()
    assert detector.report() == ""
    assert not model[0]._forward_hooks and not model[0]._backward_hooks
    assert all(not p._backward_hooks for p in model.parameters() if p._backward_hooks is not None)


@pytest.mark.parametrize("bad", [float("inf"), float("nan")])
def test_detector_names_the_first_module_of_nested_ones(bad):
    class Bad(torch.nn.Module):
        def forward(self, x):
            return x * bad

    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Sequential(torch.nn.Sigmoid(), Bad()),
                                torch.nn.Linear(3, 1))
    with NanDetector(model) as detector:
        model(torch.ones(2, 3)).sum()
    kind = "inf" if bad == float("inf") else "nan"
    assert detector.report().startswith(f"{kind} first appeared in the forward output of module '1.1' (Bad")
