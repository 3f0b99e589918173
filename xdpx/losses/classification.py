"""Classification losses: cross_entropy (with optional label smoothing), label_smooth_ce and bce (sigmoid,
one-vs-rest)."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from xdpx.config.options import Option
from xdpx.config.ranges import in_range
from xdpx.losses import losses
from xdpx.losses.base import Loss, major_metric_rule, target_type_rule

CLASSIFICATION_METRICS = ("accuracy, macro_precision, macro_recall, macro_f1, micro_precision, micro_recall, "
                          "micro_f1; with 2 classes also precision, recall, f1, auc")


@losses.register("cross_entropy")
class CrossEntropy(Loss):
    """Softmax cross-entropy over class logits ``[B, C]`` and class ids ``[B]``."""

    options = [
        Option("label_smoothing", float, default=0.0, validate=in_range(0, 1, high_open=True),
               doc="probability mass moved from the true class to all classes uniformly (Szegedy et al., "
                   "2016); 0 is plain cross-entropy"),
        major_metric_rule(("classification",), CLASSIFICATION_METRICS),
        target_type_rule(regression=False),
    ]

    def compute(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        # float32 even under autocast: a bf16 sum over a batch loses digits.
        return F.cross_entropy(logits.float(), target.long(), reduction="sum",
                               label_smoothing=self.args.get("label_smoothing") or 0.0)


@losses.register("label_smooth_ce")
class LabelSmoothCrossEntropy(CrossEntropy):
    """cross_entropy with label smoothing on by default (0.1): the seed documents' name for it."""

    options = [
        Option("label_smoothing", float, default=0.1, validate=in_range(0, 1, high_open=True),
               doc="probability mass moved from the true class to all classes uniformly"),
        *CrossEntropy.options[1:],
    ]


@losses.register("bce")
class BinaryCrossEntropy(Loss):
    """Sigmoid cross-entropy: one logit ``[B]`` against 0/1 targets, or ``[B, C]`` one-vs-rest."""

    options = [major_metric_rule(("classification",), CLASSIFICATION_METRICS),
               target_type_rule(regression=False)]

    def compute(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        logits = logits.float()
        if logits.dim() == 1:
            labels = target.float()
        else:
            labels = F.one_hot(target.long(), logits.size(-1)).float()
        return F.binary_cross_entropy_with_logits(logits, labels, reduction="sum")
