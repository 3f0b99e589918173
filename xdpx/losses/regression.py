"""Regression loss: mse over one predicted value per sample."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from xdpx.losses import losses
from xdpx.losses.base import Loss, major_metric_rule, target_type_rule


@losses.register("mse")
class MeanSquaredError(Loss):
    """Squared error between predictions ``[B]`` and real-valued targets ``[B]`` (summed)."""

    options = [major_metric_rule(("regression",), "pearson, spearman"), target_type_rule(regression=True)]
    kinds = ("regression",)

    def compute(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(logits.float().reshape(-1), target.float().reshape(-1), reduction="sum")
