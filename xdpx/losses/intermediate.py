"""``loss: tinybert``: intermediate-layer distillation of a BERT student (Jiao et al., 2020, TinyBERT).

On top of :class:`~xdpx.losses.distill.DistillLoss` (the logits), per sample:

    hidden_weight    * mean over matched layers of MSE(W_h h_student, h_teacher)   (embeddings included)
    attention_weight * mean over matched layers of MSE(scores_student, scores_teacher)

over the real tokens (padding left out). Student layer i (1..L_s) matches teacher layer ``layer_map[i-1]``,
by default TinyBERT's uniform map i * L_t / L_s; the embedding outputs match each other. ``W_h`` is the
learned projection the task gives the student when its hidden width differs from the teacher's
(xdpx/models/distill_modules.py), trained with the student. Attention scores are q k^T / sqrt(d) before the
softmax; when the numbers of heads differ, each side's mean over its heads is matched. Only an online
teacher (``task: distill, teacher: <a BERT run>``) gives the teacher's layers; evaluation scores the labels.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xdpx.config.options import Option
from xdpx.config.ranges import at_least
from xdpx.losses import losses
from xdpx.losses.distill import DISTILL_OPTIONS, DistillLoss
from xdpx.models.distill_modules import BertInternals, project


def default_layer_map(student_layers: int, teacher_layers: int) -> list[int]:
    """TinyBERT's uniform map: student layer i (1-based) -> teacher layer i * L_t // L_s."""
    return [(i + 1) * teacher_layers // student_layers for i in range(student_layers)]


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-sample mean of ``values`` ``[B, ...]`` over the positions where ``mask`` (broadcastable) is 1."""
    mask = mask.to(values.dtype).expand_as(values)
    dims = tuple(range(1, values.dim()))
    return (values * mask).sum(dims) / mask.sum(dims).clamp_min(1)


@losses.register("tinybert")
class TinyBertLoss(DistillLoss):
    """distill plus hidden-state and attention-score matching with the teacher's layers (BERT students)."""

    wants_internals = True
    options = [
        *DISTILL_OPTIONS,
        Option("hidden_weight", float, default=1.0, validate=at_least(0),
               doc="weight of the hidden-state matching (mean squared error after the learned projection)"),
        Option("attention_weight", float, default=1.0, validate=at_least(0),
               doc="weight of the attention-score matching (mean squared error of q k^T / sqrt(d))"),
        Option("layer_map", list[int], default=None, validate=at_least(1, min_items=1),
               doc="for each student layer (bottom first), the teacher layer (1-based) it learns from; "
                   "null: uniform, student layer i from teacher layer i * L_teacher / L_student"),
    ]

    def wants_attention(self) -> bool:
        return float(self.args.attention_weight) > 0

    def __call__(self, model: nn.Module, batch: dict[str, Any],
                 keep_outputs: bool = False) -> tuple[torch.Tensor, int, dict[str, Any]]:
        # evaluation (x-eval, quantize's scoring) may pass an exported model, which has no training flag
        teacher = batch.get("teacher_internals") if getattr(model, "training", False) else None
        if teacher is None:
            return super().__call__(model, batch, keep_outputs)

        with BertInternals(model, attention=self.wants_attention()) as student:
            loss_sum, sample_size, logs = super().__call__(model, batch, keep_outputs)
        net_input = batch["net_input"]
        mask = net_input.get("attention_mask")
        if mask is None:
            mask = net_input["input_ids"].ne(self.args.pad_index)
        layer_map = self.args.layer_map or default_layer_map(len(student.hidden) - 1, len(teacher.hidden) - 1)
        if len(layer_map) != len(student.hidden) - 1 or max(layer_map) > len(teacher.hidden) - 1:
            raise ValueError(f"layer_map {layer_map} must name one teacher layer (1..{len(teacher.hidden) - 1}) "
                             f"for each of the student's {len(student.hidden) - 1} layers")
        pairs = [(0, 0), *((i + 1, t) for i, t in enumerate(layer_map))]
        per_sample = torch.zeros(mask.size(0), device=mask.device)
        if float(self.args.hidden_weight) > 0:
            hidden = torch.stack([self.hidden_error(project(model, student.hidden[s]), teacher.hidden[t], mask)
                                  for s, t in pairs]).mean(0)
            per_sample = per_sample + float(self.args.hidden_weight) * hidden
        if self.wants_attention():
            square = (mask[:, None, :, None] * mask[:, None, None, :]).bool()
            scores = torch.stack([self.score_error(student.scores[s - 1], teacher.scores[t - 1], square)
                                  for s, t in pairs[1:]]).mean(0)
            per_sample = per_sample + float(self.args.attention_weight) * scores
        loss_sum = loss_sum + per_sample.sum()
        logs["loss"] = loss_sum.detach()
        return loss_sum, sample_size, logs

    @staticmethod
    def hidden_error(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        # a [CLS]-pooled classifier's last layer computes the first token only: compare what both have
        length = min(student.size(1), teacher.size(1))
        error = (student[:, :length].float() - teacher[:, :length].float()) ** 2
        return masked_mean(error, mask[:, :length, None])

    @staticmethod
    def score_error(student: torch.Tensor, teacher: torch.Tensor, square: torch.Tensor) -> torch.Tensor:
        if student.size(1) != teacher.size(1):  # different numbers of heads: match the mean head
            student, teacher, square = student.mean(1, keepdim=True), teacher.mean(1, keepdim=True), square[:, :1]
        return masked_mean((student.float() - teacher.float()) ** 2, square)
