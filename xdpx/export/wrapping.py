"""A model with positional inputs in a fixed order: what tracing and ONNX export need.

Our models take their ``net_input`` tensors by name (``model(**net_input)``); TorchScript tracing and
the ONNX exporter see positional arguments, so the wrapper fixes the order once and export.json
records it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class PositionalModel(nn.Module):
    """``PositionalModel(model, ['input_ids', 'token_type_ids', 'attention_mask'])(*tensors)``."""

    def __init__(self, model: nn.Module, input_names: list[str]) -> None:
        super().__init__()
        self.model = model
        self.input_names = list(input_names)

    def forward(self, *inputs: torch.Tensor) -> Any:
        return self.model(**dict(zip(self.input_names, inputs)))


def positional(batch: dict[str, Any], input_names: list[str]) -> tuple[torch.Tensor, ...]:
    return tuple(batch[name] for name in input_names)
