"""What intermediate-layer distillation reads from a BERT: hidden states and attention scores, by forward hooks.

The BERT models keep their forward as it is (one fused attention through SDPA, no probabilities kept);
:class:`BertInternals` hooks the embedding output, each layer's output and each self-attention's input
while one forward runs, and gives back

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

PROJECTION = "distill_projection"


def has_internals(model: nn.Module) -> bool:
    """Whether ``model`` is one of our BERT models (embedding_module / encoder_layers, xdpx.models.bert_base)."""
    return callable(getattr(model, "embedding_module", None)) and callable(getattr(model, "encoder_layers", None))


class BertInternals:
    """Context manager: hooks on ``model`` for one forward; ``hidden`` and ``scores`` afterwards."""

    def __init__(self, model: nn.Module, attention: bool = True) -> None:
        if not has_internals(model):
            raise ValueError(f"{type(model).__name__} has no BERT layers to match (intermediate-layer "
                             "distillation needs BERT teacher and student: model bert_classification, ...)")
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
