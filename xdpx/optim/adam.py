"""adam: Adam with decoupled weight decay (AdamW, Loshchilov & Hutter 2019), from torch.

torch has three implementations of the same update: a Python loop over the parameters (``for_loop``,
torch's default on the CPU), ``foreach`` (one multi-tensor kernel per operation; bit for bit the loop's
result) and ``fused`` (one kernel for the whole update, CPU and CUDA). On MiniLM's 22.6M parameters one
CPU step takes 98 ms with the loop, 74 ms foreach and 15 ms fused (docs/benchmarks.md); fused differs
from the loop by float rounding only (2.4e-7 after 8 steps). The choice is saved in the optimizer state,
so a resumed run keeps the implementation it started with and stays bit for bit.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xdpx.config.options import Option
from xdpx.config.ranges import above, in_range
from xdpx.optim import optimizers
from xdpx.optim.base import WEIGHT_DECAY, OptimizerComponent, parameter_groups

FUSED_DEVICES = {"cpu", "cuda", "xpu", "mps"}  # torch.optim.AdamW(fused=True) kernels (torch >= 2.4)


@optimizers.register("adam")
class Adam(OptimizerComponent):
    """AdamW; weight decay skips biases and normalisation weights."""

    options = [
        Option("adam_betas", list[float], default=[0.9, 0.999],
               validate=in_range(0, 1, high_open=True, min_items=2, max_items=2),
               doc="decay rates of the running averages of the gradient and of its square"),
        Option("adam_eps", float, default=1e-6, validate=above(0),
               doc="added to the denominator for numerical stability"),
        WEIGHT_DECAY,
        Option("adam_implementation", str, default="fused", choices=["fused", "foreach", "for_loop"],
               doc="how torch computes the update: fused (one kernel, fastest; CPU and CUDA), foreach "
                   "(multi-tensor kernels, bit for bit for_loop) or for_loop (torch's reference loop); a "
                   "device without a fused kernel falls back to foreach"),
    ]

    @classmethod
    def build(cls, args: Any, model: nn.Module) -> torch.optim.Optimizer:
        groups = parameter_groups(model, args.weight_decay)
        return torch.optim.AdamW(groups, lr=args.learning_rate, betas=tuple(args.adam_betas), eps=args.adam_eps,
                                 **implementation_flags(args.adam_implementation, model))


def implementation_flags(implementation: str, model: nn.Module) -> dict[str, bool]:
    """torch.optim's ``fused`` / ``foreach`` arguments for ``implementation``."""
    if implementation == "fused":
        devices = {p.device.type for p in model.parameters()}
        if devices and devices <= FUSED_DEVICES:
            return {"fused": True}
        implementation = "foreach"
    return {"foreach": implementation == "foreach"}

