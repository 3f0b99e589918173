"""Circle loss (Sun et al., 2020) for binary matching: positive pairs pulled towards similarity 1, negative
pairs pushed towards 0, each weighted by how far it is from its optimum."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from xdpx.config.options import Option, Rule
from xdpx.config.ranges import above, in_range
from xdpx.losses import losses
from xdpx.losses.base import Loss, major_metric_rule, target_type_rule
from xdpx.losses.classification import CLASSIFICATION_METRICS


def similarity(logits: torch.Tensor) -> torch.Tensor:
    """The similarity of each pair in [0, 1]: the probability of class 1 that the metrics and x-pred report
    (sigmoid of one logit; softmax of two logits, which is the sigmoid of their difference)."""
    logits = logits.float()
    return torch.sigmoid(logits if logits.dim() == 1 else logits[:, 1] - logits[:, 0])


@losses.register("circle")
class CircleLoss(Loss):
    """Circle loss over the pairs of a batch (2 classes: 0 = no match, 1 = match; or one logit).

    With similarities s_p of the matching pairs and s_n of the others, margin m and scale gamma::

        L = softplus( logsumexp_n(gamma a_n (s_n - m)) + logsumexp_p(-gamma a_p (s_p - 1 + m)) )
        a_p = max(0, 1 + m - s_p),  a_n = max(0, s_n + m)   (no gradient through the weights)

    A batch with pairs of one kind only keeps that side's term (as the original XDPX does), so it still
    learns. The loss is one number for the whole batch: it is reported as that number times the batch size,
    with the batch size as sample size, so an update over several micro-batches averages their batch
    losses by size (the pairs of a batch meet only each other: micro-batches are not one big batch here).
    """

    options = [
        Option("circle_scale", float, default=32.0, validate=above(0),
               doc="gamma: the scale of the similarities inside the log-sum-exps (sharper with more)"),
        Option("circle_margin", float, default=0.25, validate=in_range(0, 0.5),
               doc="m: matching pairs aim above 1 - m, the others below m"),
        Rule(lambda a: a.get("num_classes") in (1, 2),
             "the circle loss scores pairs as match / no match: it needs num_classes 2 (or 1, one logit)",
             keys=("loss", "num_classes")),
        major_metric_rule(("classification",), CLASSIFICATION_METRICS),
        target_type_rule(regression=False),
    ]

    def batch_loss(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The circle loss of one batch (not multiplied by its size)."""
        s = similarity(logits)
        positive = target.long() == 1
        m, gamma = self.args.circle_margin, self.args.circle_scale
        total = s.new_zeros(())
        if positive.any():
            s_p = s[positive]
            a_p = (1 + m - s_p.detach()).clamp_min(0)
            total = total + torch.logsumexp(-gamma * a_p * (s_p - 1 + m), dim=0)
        if not positive.all():
            s_n = s[~positive]
            a_n = (s_n.detach() + m).clamp_min(0)
            total = total + torch.logsumexp(gamma * a_n * (s_n - m), dim=0)
        return F.softplus(total)

    def compute(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return self.batch_loss(logits, target) * target.size(0)
