"""sgd: stochastic gradient descent with (optional) momentum, from torch."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xdpx.config.options import Option, Rule
from xdpx.config.ranges import at_least, in_range
from xdpx.optim import optimizers
from xdpx.optim.base import OptimizerComponent, parameter_groups


@optimizers.register("sgd")
class SGD(OptimizerComponent):
    """SGD; weight decay here is the classic L2 term added to the gradient (torch's SGD)."""

    options = [
        Option("momentum", float, default=0.0, validate=in_range(0, 1, high_open=True),
               doc="momentum factor; 0 is plain SGD"),
        Option("nesterov", bool, default=False, doc="Nesterov momentum (needs momentum > 0)"),
        Option("weight_decay", float, default=0.0, validate=at_least(0),
               doc="L2 penalty added to the gradient; biases and normalisation weights are not decayed"),
        Rule(lambda a: not a.nesterov or a.momentum > 0, "nesterov needs momentum > 0",
             keys=("nesterov", "momentum")),
    ]

    @classmethod
    def build(cls, args: Any, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(parameter_groups(model, args.weight_decay), lr=args.learning_rate,
                               momentum=args.momentum, nesterov=args.nesterov)
