"""adam: Adam with decoupled weight decay (AdamW, Loshchilov & Hutter 2019), from torch."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xdpx.config.options import Option
from xdpx.optim import optimizers
from xdpx.optim.base import WEIGHT_DECAY, OptimizerComponent, parameter_groups


def valid_betas(values: list[float]) -> bool:
    return len(values) == 2 and all(0.0 <= v < 1.0 for v in values)


@optimizers.register("adam")
class Adam(OptimizerComponent):
    """AdamW; weight decay skips biases and normalisation weights."""

    options = [
        Option("adam_betas", list[float], default=[0.9, 0.999], validate=valid_betas,
               validate_msg="must be two numbers in [0, 1)",
               doc="decay rates of the running averages of the gradient and of its square"),
        Option("adam_eps", float, default=1e-6, validate=lambda v: v > 0, validate_msg="must be > 0",
               doc="added to the denominator for numerical stability"),
        WEIGHT_DECAY,
    ]

    @classmethod
    def build(cls, args: Any, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.AdamW(parameter_groups(model, args.weight_decay), lr=args.learning_rate,
                                 betas=tuple(args.adam_betas), eps=args.adam_eps)
