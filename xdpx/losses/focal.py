"""Losses that weight samples by how hard they are: focal (Lin et al., 2017) and ghmc (Li et al., 2019).

Both are for class logits and report the classification metrics. Their option names carry the loss's name
(``focal_gamma``, ``ghm_momentum``): options share one namespace per run, and a bare ``momentum`` is
already sgd's.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.nn import functional as F

from xdpx.config.options import Option, Rule
from xdpx.config.ranges import at_least, in_range
from xdpx.losses import losses
from xdpx.losses.base import Loss, major_metric_rule, target_type_rule
from xdpx.losses.classification import CLASSIFICATION_METRICS


def _alpha_fits(args: Any) -> bool:
    alpha = args.get("focal_alpha")
    classes = args.get("num_classes") or 1
    return alpha is None or len(alpha) == max(classes, 2)


@losses.register("focal")
class FocalLoss(Loss):
    """Focal loss: ``-alpha_t (1 - p_t)^gamma log p_t`` summed over the batch, where ``p_t`` is the
    probability of the true class (softmax over ``[B, C]`` logits, sigmoid of one logit ``[B]``).
    ``gamma`` 0 with no ``alpha`` is cross-entropy; a larger gamma lowers the weight of samples the model
    already gets right, so the rare and hard ones dominate the gradient."""

    options = [
        Option("focal_gamma", float, default=2.0, validate=at_least(0),
               doc="focusing exponent: (1 - p_t)^gamma multiplies each sample's cross-entropy; 0 turns it off"),
        Option("focal_alpha", list[float], default=None, validate=at_least(0),
               doc="one weight per class (class order of target_map.txt; [negative, positive] for one "
                   "sigmoid logit), multiplying the loss of samples of that class; null weighs all alike"),
        Rule(_alpha_fits, "focal_alpha needs one weight per class (2 for a single sigmoid logit)",
             keys=("focal_alpha", "num_classes")),
        major_metric_rule(("classification",), CLASSIFICATION_METRICS),
        target_type_rule(regression=False),
    ]

    def compute(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        logits, target = logits.float(), target.long()
        if logits.dim() == 1:  # one sigmoid logit: classes 0 and 1 are its two log-sigmoids
            logits = torch.stack([torch.zeros_like(logits), logits], dim=1)
        log_p_true = F.log_softmax(logits, dim=-1).gather(1, target.unsqueeze(1)).squeeze(1)
        gamma = self.args.focal_gamma
        weight = (1.0 - log_p_true.exp()).pow(gamma) if gamma else torch.ones_like(log_p_true)
        alpha = self.args.get("focal_alpha")
        if alpha is not None:
            weight = weight * torch.tensor(alpha, dtype=weight.dtype, device=weight.device)[target]
        return -(weight * log_p_true).sum()


@losses.register("ghmc")
class GradientHarmonizedLoss(Loss):
    """GHM-C (gradient harmonizing mechanism for classification, Li et al., 2019): sigmoid cross-entropy
    (one logit ``[B]``, or one-vs-rest over ``[B, C]``) where each logit's loss is divided by how many
    logits of the batch have a similar gradient norm ``g = |sigmoid(x) - y|``. The range of g is cut into
    ``ghm_bins`` bins; a logit in bin i weighs ``N / (count_i * nonempty_bins)`` (N logits), so the many
    easy logits (g near 0) and the few outliers (g near 1) both count less. The per-sample loss is the mean
    over its C logits, summed over the batch.

    ``ghm_momentum`` > 0 replaces the counts by their running average over the training batches (the paper's
    EMA); that running average is part of the training state (saved and restored on resume). Validation,
    x-eval and x-pred use each batch's own counts, so their losses do not depend on the training history.
    With update_freq or several processes each micro-batch counts on its own.
    """

    options = [
        Option("ghm_bins", int, default=10, validate=at_least(1),
               doc="number of equal bins of the gradient norm |sigmoid(logit) - target| in [0, 1]"),
        Option("ghm_momentum", float, default=0.0, validate=in_range(0, 1, high_open=True),
               doc="weight of the previous running bin counts in each training batch's counts (0: each "
                   "batch's own counts)"),
        major_metric_rule(("classification",), CLASSIFICATION_METRICS),
        target_type_rule(regression=False),
    ]

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.running_counts: torch.Tensor | None = None

    def bin_counts(self, bins: torch.Tensor) -> torch.Tensor:
        """This batch's count of logits per bin; in training, folded into the running counts."""
        counts = torch.bincount(bins.reshape(-1), minlength=self.args.ghm_bins).float()
        momentum = self.args.ghm_momentum
        if momentum > 0 and torch.is_grad_enabled():  # training only (evaluation runs under no_grad)
            if self.running_counts is not None:
                counts = momentum * self.running_counts.to(counts.device) + (1 - momentum) * counts
            self.running_counts = counts.detach().clone()
        return counts

    def compute(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        logits = logits.float()
        if logits.dim() == 1:
            labels = target.float().unsqueeze(1)
            logits = logits.unsqueeze(1)
        else:
            labels = F.one_hot(target.long(), logits.size(-1)).float()
        bins_count = self.args.ghm_bins
        g = (torch.sigmoid(logits.detach()) - labels).abs()
        # g == 1 falls into the last bin, not one past it
        bins = (g * bins_count).long().clamp_(max=bins_count - 1)
        counts = self.bin_counts(bins)
        nonempty = int((counts > 0).sum())
        weight = logits.numel() / (counts[bins] * nonempty).clamp_min(1e-4)
        loss = F.binary_cross_entropy_with_logits(logits, labels, weight=weight, reduction="none")
        return loss.mean(dim=1).sum()

    def state_dict(self) -> dict[str, Any]:
        return {"running_counts": self.running_counts}

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        self.running_counts = (state or {}).get("running_counts")
