"""lamb: layer-wise adaptive moments (You et al., 2020, "Large Batch Optimization for Deep Learning").

Per parameter tensor x, with gradient g at update t (Algorithm 2 of the paper, phi = identity)::

    m = beta1 m + (1 - beta1) g            v = beta2 v + (1 - beta2) g^2
    r = (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
    u = r + weight_decay x
    x = x - lr * (||x|| / ||u||) * u       (trust ratio 1 when either norm is 0)

The trust ratio gives every layer a step proportional to its own weight norm, which keeps very large
batches stable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from xdpx.config.options import Option
from xdpx.config.ranges import above, in_range
from xdpx.optim import optimizers
from xdpx.optim.base import WEIGHT_DECAY, OptimizerComponent, parameter_groups


class LambOptimizer(torch.optim.Optimizer):
    """The LAMB update above; state per parameter: ``step``, ``exp_avg``, ``exp_avg_sq``."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-6, weight_decay: float = 0.0) -> None:
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad.float()
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p, dtype=torch.float32)
                    state["exp_avg_sq"] = torch.zeros_like(p, dtype=torch.float32)
                state["step"] += 1
                t = state["step"]
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                update = (exp_avg / (1 - beta1**t)) / ((exp_avg_sq / (1 - beta2**t)).sqrt() + group["eps"])
                weights = p.float()
                if group["weight_decay"]:
                    update.add_(weights, alpha=group["weight_decay"])
                weight_norm, update_norm = weights.norm(), update.norm()
                trust_ratio = torch.where((weight_norm > 0) & (update_norm > 0), weight_norm / update_norm,
                                          torch.ones_like(weight_norm))
                p.add_((update * (-group["lr"] * trust_ratio)).to(p.dtype))
        return loss


@optimizers.register("lamb")
class Lamb(OptimizerComponent):
    """LAMB for large batches; weight decay skips biases and normalisation weights."""

    options = [
        Option("lamb_betas", list[float], default=[0.9, 0.999],
               validate=in_range(0, 1, high_open=True, min_items=2, max_items=2),
               doc="decay rates of the running averages of the gradient and of its square"),
        Option("lamb_eps", float, default=1e-6, validate=above(0),
               doc="added to the denominator for numerical stability"),
        WEIGHT_DECAY,
    ]

    @classmethod
    def build(cls, args: Any, model: nn.Module) -> torch.optim.Optimizer:
        return LambOptimizer(parameter_groups(model, args.weight_decay), lr=args.learning_rate,
                             betas=tuple(args.lamb_betas), eps=args.lamb_eps)
