"""What the optimizers share: the weight-decay option and the parameter groups it applies to."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xdpx.config.options import Option

WEIGHT_DECAY = Option(
    "weight_decay", float, default=0.0, validate=lambda v: v >= 0, validate_msg="must be >= 0",
    doc="decoupled weight decay (AdamW style: the weights shrink by lr x weight_decay each update); "
        "biases, LayerNorm weights and other 1-D parameters are never decayed",
)


def exempt_from_decay(name: str, parameter: nn.Parameter) -> bool:
    """Biases and normalisation scales (1-D tensors, or names with 'norm') set a scale, not a feature
    detector: decaying them towards zero only hurts (Loshchilov & Hutter; BERT's recipe)."""
    return parameter.dim() <= 1 or "norm" in name.lower()


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Trainable parameters in two groups, decayed and not, in the model's order (deterministic)."""
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        if parameter.requires_grad:
            (no_decay if exempt_from_decay(name, parameter) else decay).append(parameter)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return [g for g in groups if g["params"]]


class OptimizerComponent:
    """Base of the registered optimizers: ``build(args, model)`` returns a torch optimizer."""

    options: list[Any] = []

    @classmethod
    def build(cls, args: Any, model: nn.Module) -> torch.optim.Optimizer:
        raise NotImplementedError
