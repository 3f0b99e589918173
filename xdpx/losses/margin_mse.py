"""``margin_mse`` (MarginMSE, Hofstätter et al., 2020): distil a cross-encoder into the bi-encoder through
score margins. Per sample (query q, positive p, negative n) the bi-encoder's margin ``s(q, p) - s(q, n)``
(``similarity``: dot product, as the paper, or cosine) is regressed onto the teacher's margin:
``(student margin - teacher margin)^2``, summed over the batch.

The teacher's scores travel as distillation data carries teacher logits (xdpx/data/distill_data.py): the
data is prepared with ``loader: triplet`` and ``teacher_logits: true``; each record is query, positive,
negative (an optional label), then ``num_logits`` numbers: 2 (the teacher's scores of (q, p) and (q, n),
whose difference is the margin) or 1 (the margin itself; a record of 1 logit also needs the label column,
or its last number reads as the label). x-prepro stores them beside the tokens and each batch brings them
as ``teacher_logits``.

Evaluation: a batch with the teacher's scores (a prepared split) reports their margin MSE as its loss; a
batch without them (a raw file given to x-eval, a dev split of plain triplets) has no target to regress
on and reports loss 0, beside the retrieval metrics, which need no teacher: choose one of those as
major_metric. Training without the teacher's scores stops with an error naming the fix.
"""

from __future__ import annotations

from typing import Any

import torch

from xdpx.config.options import Option, Rule
from xdpx.errors import UserError
from xdpx.losses import losses
from xdpx.losses.bi_encoder import BI_ENCODER_RULE, MAJOR_METRIC_RULE, RECALL_AT, BiEncoderLoss
from xdpx.losses.matryoshka import MATRYOSHKA_OPTIONS


def teacher_margins(teacher: torch.Tensor) -> torch.Tensor:
    """The teacher's margin per sample from its logits ``[B, 1]`` (the margin) or ``[B, 2]`` (two scores)."""
    if teacher.dim() != 2 or teacher.size(1) not in (1, 2):
        raise ValueError(f"margin_mse reads 1 teacher number (the margin) or 2 (the scores of query-positive and "
                         f"query-negative) per sample, got {tuple(teacher.shape[1:])}: set num_logits 1 or 2")
    return teacher[:, 0] if teacher.size(1) == 1 else teacher[:, 0] - teacher[:, 1]


@losses.register("margin_mse")
class MarginMSE(BiEncoderLoss):
    """(s(q, p) - s(q, n) - teacher margin)^2, summed over the batch (see the module docstring)."""

    options = [
        Option("similarity", str, default="dot", choices=("dot", "cosine"),
               doc="the bi-encoder's score of two texts: dot (dot product, as MarginMSE and a cross-encoder's "
                   "unbounded scores) or cosine (bounded in [-1, 1]: the teacher's margins must be too)"),
        Rule(lambda a: a.get("loader") == "triplet" and bool(a.get("teacher_logits")),
             "margin_mse regresses onto a teacher's margins: prepare the data with loader: triplet and "
             "teacher_logits: true (query, positive, negative, then the teacher's 2 scores or its margin)",
             keys=("loss", "loader", "teacher_logits")),
        Rule(lambda a: a.get("num_logits") in (1, 2, None), "margin_mse reads 1 teacher number per record (the "
             "margin) or 2 (the scores of query-positive and query-negative): set num_logits 1 or 2",
             keys=("loss", "num_logits")),
        RECALL_AT, MAJOR_METRIC_RULE, BI_ENCODER_RULE, *MATRYOSHKA_OPTIONS,
    ]

    def student_margins(self, embeddings: torch.Tensor) -> torch.Tensor:
        if embeddings.size(1) < 3:
            raise ValueError("margin_mse needs a negative per sample: a third text (loader triplet)")
        vectors = embeddings.float()  # float32: the margin of two large dot products loses digits in bf16
        if self.args.similarity == "cosine":
            vectors = torch.nn.functional.normalize(vectors, dim=-1)
        query, positive, negative = vectors[:, 0], vectors[:, 1], vectors[:, 2]
        return (query * positive).sum(-1) - (query * negative).sum(-1)

    def margin_loss(self, embeddings: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
        margins = teacher_margins(teacher.float().to(embeddings.device))
        return (self.student_margins(embeddings) - margins).pow(2).sum()

    def batch_loss(self, embeddings: torch.Tensor, target: torch.Tensor, batch: dict[str, Any]) -> torch.Tensor:
        teacher = batch.get("teacher_logits")
        if teacher is not None:
            return self.margin_loss(embeddings, teacher)
        if torch.is_grad_enabled() and embeddings.requires_grad:
            raise UserError("margin_mse: a training batch without the teacher's scores: prepare the training "
                             "data with teacher_logits: true and num_logits 1 or 2 (every record ends with them)")
        return embeddings.new_zeros((), dtype=torch.float32)  # evaluation without a teacher: the metrics decide
