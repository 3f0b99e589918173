"""The update's normalisation and clipping: one multiply before the step, or divided by torch's fused step."""

from __future__ import annotations

import math

import pytest
import torch
from train_helpers import final_weights, write_config

from xdpx.cli import resolve_runs
from xdpx.train.loop import Trainer

CLIP = 0.05  # far below the gradient norms of the first updates: every update is clipped


def one_update(reviews, tmp_path, implementation: str) -> tuple[dict, list, dict]:
    config = write_config(tmp_path / f"{implementation}.hjson", reviews, tmp_path / implementation,
                          max_update=1, max_epoch=..., clip_norm=CLIP, adam_implementation=implementation,
                          weight_decay=0.01)
    trainer = Trainer(resolve_runs("x-train", str(config))[0])
    seen: dict = {}

    def before_step(optimizer, args, kwargs):
        seen["grad_scale"] = getattr(optimizer, "grad_scale", None)
        seen["grads"] = [p.grad.clone() for group in optimizer.param_groups for p in group["params"]]

    def after_step(optimizer, args, kwargs):
        seen["after"] = [p.grad.clone() for group in optimizer.param_groups for p in group["params"]]

    optimizer = trainer.optimizer  # fit() lets go of it when it closes
    optimizer.register_step_pre_hook(before_step)
    optimizer.register_step_post_hook(after_step)
    trainer.fit()
    seen["attribute_left"] = hasattr(optimizer, "grad_scale")  # the scale was this update's only
    return seen, seen["after"], final_weights(tmp_path / implementation)


@pytest.mark.parametrize("implementation", ["fused", "foreach"])
def test_the_step_sees_normalised_clipped_gradients(reviews, tmp_path, implementation):
    seen, after, _ = one_update(reviews, tmp_path, implementation)
    norm = math.sqrt(sum(float(g.double().pow(2).sum()) for g in after))
    assert norm == pytest.approx(CLIP, rel=1e-5)  # clip_grad_norm_'s rule: clip / (norm + 1e-6)
    assert seen["attribute_left"] is False
    if implementation == "fused":  # the fused kernel divided the summed gradients as it read them
        scale = float(seen["grad_scale"])
        assert scale > 1.0
        for before, quotient in zip(seen["grads"], after, strict=True):
            torch.testing.assert_close(before / scale, quotient, rtol=1e-6, atol=0.0)
    else:  # foreach has no such kernel: the gradients were multiplied before the step
        assert seen["grad_scale"] is None
        torch.testing.assert_close(seen["grads"], after, rtol=0.0, atol=0.0)


def test_fused_and_foreach_steps_agree(reviews, tmp_path):
    _, after_fused, fused = one_update(reviews, tmp_path, "fused")
    _, after_foreach, foreach = one_update(reviews, tmp_path, "foreach")
    torch.testing.assert_close(after_fused, after_foreach, rtol=1e-5, atol=1e-9)
    torch.testing.assert_close(fused, foreach, rtol=1e-5, atol=1e-7)
