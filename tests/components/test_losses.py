"""Losses: summed values against torch references, sample sizes, logs."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from tests.components.helpers import make_args
from xdpx.losses import losses


class Fixed(torch.nn.Module):
    """A 'model' returning given logits, so the loss alone is under test."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.logits = torch.nn.Parameter(logits)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.logits


LOGITS = torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.2, 0.3], [-1.0, 3.0, 0.0], [0.0, 0.0, 0.0]])
TARGET = torch.tensor([0, 2, 1, 1])


def run(name: str, logits: torch.Tensor, target: torch.Tensor, **config: object):
    loss = losses.get(name)(make_args(loss=name, **config))
    batch = {"net_input": {"tokens": torch.zeros(len(target), 2, dtype=torch.long)}, "target": target}
    return loss(Fixed(logits.clone()), batch, keep_outputs=True)


def test_cross_entropy_is_the_sum_over_the_batch():
    loss_sum, sample_size, logs = run("cross_entropy", LOGITS, TARGET)
    torch.testing.assert_close(loss_sum, F.cross_entropy(LOGITS, TARGET) * 4)
    assert sample_size == 4 and logs["nsamples"] == 4 and logs["sample_size"] == 4
    torch.testing.assert_close(logs["loss"], loss_sum.detach())
    assert not logs["loss"].requires_grad and loss_sum.requires_grad
    torch.testing.assert_close(logs["logits"], LOGITS)
    assert torch.equal(logs["target"], TARGET)


def test_label_smoothing_mixes_the_true_class_with_the_uniform_distribution():
    loss_sum, _, _ = run("label_smooth_ce", LOGITS, TARGET, label_smoothing=0.2)
    log_probs = LOGITS.log_softmax(-1)
    by_hand = -(0.8 * log_probs[torch.arange(4), TARGET] + 0.2 * log_probs.mean(-1)).sum()
    torch.testing.assert_close(loss_sum, by_hand)


def test_bce_on_one_logit_and_one_vs_rest():
    logits = torch.tensor([1.5, -0.5, 0.0])
    target = torch.tensor([1, 0, 1])
    loss_sum, _, _ = run("bce", logits, target, num_classes=1)
    p = torch.sigmoid(logits)
    by_hand = -(target * p.log() + (1 - target) * (1 - p).log()).sum()
    torch.testing.assert_close(loss_sum, by_hand)
    loss_sum, _, _ = run("bce", LOGITS, TARGET)
    one_hot = F.one_hot(TARGET, 3).float()
    torch.testing.assert_close(loss_sum, F.binary_cross_entropy_with_logits(LOGITS, one_hot, reduction="sum"))


def test_mse_sums_squared_errors():
    loss_sum, sample_size, _ = run("mse", torch.tensor([0.5, 2.0, -1.0]), torch.tensor([1.0, 2.0, 1.0]),
                                   target_type="regression", major_metric="pearson")
    assert loss_sum.item() == pytest.approx(0.25 + 0.0 + 4.0) and sample_size == 3


def test_bf16_logits_give_a_float32_loss():
    loss_sum, _, _ = run("cross_entropy", LOGITS.bfloat16(), TARGET)
    assert loss_sum.dtype == torch.float32
