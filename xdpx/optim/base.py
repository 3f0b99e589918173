"""What the optimizers share: the weight-decay option and the parameter groups it applies to."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xdpx.config.options import Option
from xdpx.config.ranges import at_least

WEIGHT_DECAY = Option(
    "weight_decay", float, default=0.0, validate=at_least(0),
    doc="decoupled weight decay (AdamW style: the weights shrink by lr x weight_decay each update); "
        "biases, LayerNorm weights and other 1-D parameters are never decayed",
)


def exempt_from_decay(name: str, parameter: nn.Parameter) -> bool:
    """Biases and normalisation scales (1-D tensors, or names with 'norm') set a scale, not a feature
    detector: decaying them towards zero only hurts (Loshchilov & Hutter; BERT's recipe)."""
    return parameter.dim() <= 1 or "norm" in name.lower()


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Trainable parameters in two groups, decayed and not, in the model's order (deterministic).

    A model with ``lr_scales() -> {name: multiplier}`` (BERT: layer_lr_decay, head_lr_multiplier) gets
    one pair of groups per multiplier, each with ``lr_scale``; the lr schedule multiplies its lr by it.
    The groups at the full lr come first (the lr logged is param_groups[0]'s).
    """
    scales = model.lr_scales() if hasattr(model, "lr_scales") else {}
    buckets: dict[tuple[float, bool], list[nn.Parameter]] = {}
    for name, parameter in model.named_parameters():
        if parameter.requires_grad:
            key = (float(scales.get(name, 1.0)), exempt_from_decay(name, parameter))
            buckets.setdefault(key, []).append(parameter)
    order = sorted(buckets, key=lambda k: (k[0] != 1.0, -k[0], k[1]))
    groups = [{"params": buckets[k], "weight_decay": 0.0 if k[1] else weight_decay} for k in order]
    for group, (scale, _) in zip(groups, order, strict=True):
        if scale != 1.0:
            group["lr_scale"] = scale
    return groups


class OptimizerComponent:
    """Base of the registered optimizers: ``build(args, model)`` returns a torch optimizer."""

    options: list[Any] = []

    @classmethod
    def build(cls, args: Any, model: nn.Module) -> torch.optim.Optimizer:
        raise NotImplementedError
