"""What intermediate-layer distillation reads from a transformer encoder: hidden states (any transformer
encoder: our BERT and the transformers family) and attention scores (our BERT), by forward hooks.

The models keep their forward as it is (our BERT: one fused attention through SDPA, no probabilities
kept); :class:`BertInternals` hooks the embedding output, each layer's output and, for our BERT, each
self-attention's input while one forward runs, and gives back

- ``hidden``: ``[embeddings, layer 1, ..., layer L]``, each ``[B, T, H]`` (the last layer of a [CLS]-pooled
  classifier computes only the first token: ``[B, 1, H]``);
- ``scores``: per layer the attention scores ``q k^T / sqrt(d)`` ``[B, heads, T, T]`` before the softmax,
  recomputed from the hooked input with the layer's own query and key (one extra matmul per layer).

:class:`HiddenProjection` maps the student's hidden width to the teacher's (TinyBERT's learned W_h) when
they differ. It is a submodule of the student (``distill_projection``) so the optimizer trains it and the
checkpoint holds it; the student's forward never calls it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xdpx.errors import UserError

PROJECTION = "distill_projection"


def has_internals(model: nn.Module) -> bool:
    """Whether ``model`` has transformer layers (embedding_module / encoder_layers: a transformer encoder)."""
    return callable(getattr(model, "embedding_module", None)) and callable(getattr(model, "encoder_layers", None))


def has_attention_scores(model: nn.Module) -> bool:
    """Whether the layers are our BERT's, whose query and key projections the score hook recomputes."""
    return all(hasattr(getattr(layer, "attention", None), "self") for layer in model.encoder_layers())


def width_of(args: Any) -> int:
    """The hidden width of a run's encoder: hidden_size (our BERT), else the transformers config's."""
    config = args.get("hf_config") or {}
    for key in ("hidden_size", "dim", "d_model", "n_embd"):
        if config.get(key):
            return int(config[key])
    if args.get("hidden_size") is not None:
        return int(args.hidden_size)
    raise ValueError("the encoder's hidden width is unknown (no hidden_size option, no hf_config hidden_size)")


class BertInternals:
    """Context manager: hooks on ``model`` for one forward; ``hidden`` and ``scores`` afterwards."""

    def __init__(self, model: nn.Module, attention: bool = True) -> None:
        if not has_internals(model):
            raise ValueError(f"{type(model).__name__} has no transformer layers to match (intermediate-layer "
                             "distillation needs transformer encoders on both sides: encoder bert or hf)")
        if attention and not has_attention_scores(model):
            raise UserError("loss tinybert: attention matching reads our BERT's attention scores (encoder: bert on "
                            "both sides); set attention_weight: 0 to match the hidden states of other encoders")
        self.model, self.attention = model, attention
        self.hidden: list[torch.Tensor] = []
        self.scores: list[torch.Tensor] = []
        self.handles: list[Any] = []

    def __enter__(self) -> BertInternals:
        self.hidden, self.scores = [], []
        self.handles.append(self.model.embedding_module().register_forward_hook(self._keep_output))
        for layer in self.model.encoder_layers():
            if self.attention:
                self.handles.append(layer.attention.self.register_forward_hook(self._keep_scores))
            self.handles.append(layer.register_forward_hook(self._keep_output))
        return self

    def __exit__(self, *exc: Any) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []

    def _keep_output(self, _module: nn.Module, _inputs: Any, output: Any) -> None:
        self.hidden.append(output[0] if isinstance(output, tuple) else output)

    def _keep_scores(self, module: nn.Module, inputs: Any, _output: Any) -> None:
        x = inputs[0]
        b, t, _ = x.shape
        q = module.query(x).view(b, t, module.heads, module.head_size).transpose(1, 2)
        k = module.key(x).view(b, t, module.heads, module.head_size).transpose(1, 2)
        self.scores.append(torch.matmul(q, k.transpose(-1, -2)) / module.head_size ** 0.5)


class HiddenProjection(nn.Module):
    """One learned linear map from the student's hidden width to the teacher's, shared by all layers."""

    def __init__(self, student_width: int, teacher_width: int) -> None:
        super().__init__()
        self.dense = nn.Linear(student_width, teacher_width)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.dense(hidden)


def attach_projection(student: nn.Module, student_width: int, teacher_width: int) -> None:
    """Give ``student`` a :class:`HiddenProjection` when the widths differ (nothing when they are equal)."""
    if student_width != teacher_width:
        student.add_module(PROJECTION, HiddenProjection(student_width, teacher_width))


def project(student: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    projection = getattr(student, PROJECTION, None)
    return projection(hidden) if projection is not None else hidden
