"""Taylor cross-entropy (Feng et al., 2020): cross-entropy over the Taylor softmax, which replaces exp by
its Taylor series of order n. The series grows polynomially, not exponentially, so one badly wrong
(e.g. mislabelled) sample weighs less than under softmax."""

from __future__ import annotations

import math

import torch

from xdpx.config.options import Option, Rule
from xdpx.config.ranges import in_range
from xdpx.losses import losses
from xdpx.losses.base import Loss, major_metric_rule, target_type_rule
from xdpx.losses.classification import CLASSIFICATION_METRICS


def taylor_exp(x: torch.Tensor, order: int) -> torch.Tensor:
    """1 + x + x^2/2! + ... + x^n/n!: positive for every x when n is even."""
    total = torch.ones_like(x)
    for i in range(1, order + 1):
        total = total + x.pow(i) / math.factorial(i)
    return total


@losses.register("taylor_ce")
class TaylorCrossEntropy(Loss):
    """``-log( f(x_y) / sum_c f(x_c) )`` with ``f`` the Taylor series of exp of order ``taylor_n``, summed over
    the batch; over class logits ``[B, C]``. Metrics and predictions still use the softmax of the logits:
    both have the same best class wherever the logits lie above the minimum of the series (-1 for n = 2)."""

    options = [
        Option("taylor_n", int, default=2, validate=in_range(2, 20),
               doc="order of the Taylor series replacing exp; even, so that the series stays positive"),
        Rule(lambda a: a.taylor_n % 2 == 0, "taylor_n must be even (2, 4, ...): an odd order makes the series "
             "negative for some logits", keys=("taylor_n",)),
        major_metric_rule(("classification",), CLASSIFICATION_METRICS),
        target_type_rule(regression=False),
    ]

    def compute(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        f = taylor_exp(logits.float(), self.args.taylor_n)
        log_p = f.log() - f.sum(dim=-1, keepdim=True).log()
        return -log_p.gather(1, target.long().unsqueeze(1)).sum()
