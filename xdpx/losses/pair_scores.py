"""Bi-encoder losses for scored pairs (STS data: two texts and a similarity score), ranking the pairs of a
batch by their scores instead of regressing each cosine onto its score:

- ``cosent`` (CoSENT, Su 2022): with c_i the cosine of pair i and s_i its score,
  ``log(1 + sum over pairs (i, j) of the batch with s_i > s_j of exp(scale * (c_j - c_i)))``: every pair
  scored higher must have the higher cosine; only the order of the scores matters.
- ``angle`` (AnglE, Li and Li 2023): the same ranking objective on an angle similarity as well. Each
  embedding is read as a complex vector (first half real parts, second half imaginary parts); the quotient
  of the two complex vectors of a pair, divided by the product of their norms, is summed over its real and
  imaginary parts and its absolute value ranks the pairs: it stays informative where the cosine
  saturates. The loss is ``cosent_weight * CoSENT(cosine) + angle_weight * CoSENT(angle, angle_scale)``.

Both objectives are one value per batch; the loss returns it times the batch size (the sum convention of
xdpx/losses/base.py), so the trainer's division by the samples of the update gives the mean over its
micro-batches of the batch value.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from xdpx.config.options import Option, Rule
from xdpx.config.ranges import above, at_least
from xdpx.losses import losses
from xdpx.losses.bi_encoder import BI_ENCODER_RULE, MAJOR_METRIC_RULE, RECALL_AT, BiEncoderLoss
from xdpx.losses.matryoshka import MATRYOSHKA_OPTIONS

SCORED_PAIRS_RULE = Rule(lambda a: a.target_type == "regression" and a.get("loader") != "triplet",
                         "this loss ranks scored pairs: it needs loader pair with a score column and "
                         "target_type: regression (e.g. STS-B's 0-5 scores)", keys=("loss", "target_type", "loader"))
SCALE = Option("scale", float, default=20.0, validate=above(0),
               doc="multiplies the cosine differences inside the exponential (sentence-transformers: 20): "
                   "larger is sharper")


def ranking_loss(similarity: torch.Tensor, target: torch.Tensor, scale: float) -> torch.Tensor:
    """``log(1 + sum_{s_i > s_j} exp(scale * (sim_j - sim_i)))`` of one batch (float32)."""
    differences = scale * (similarity[None, :] - similarity[:, None])  # [i, j]: sim_j - sim_i
    ordered = target[:, None] > target[None, :]  # pair i scored above pair j
    # logsumexp with the 1 as exp(0): no overflow for a large scale
    terms = torch.cat([differences.new_zeros(1), differences[ordered]])
    return torch.logsumexp(terms, dim=0)


def angle_similarity(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per row: |sum of the real and imaginary parts of a * conj(b) / (|a| |b|)|, a and b read as complex
    vectors (first half real, second half imaginary): AnglE's quotient a / b normalised by the norms."""
    if a.size(-1) % 2:
        raise ValueError(f"angle reads each embedding as a complex vector: its width must be even, got {a.size(-1)}")
    re_a, im_a = a.chunk(2, dim=-1)
    re_b, im_b = b.chunk(2, dim=-1)
    # a / b = a * conj(b) / |b|^2; AnglE scales it by |b| / |a|, which leaves a * conj(b) / (|a| |b|)
    real = re_a * re_b + im_a * im_b
    imaginary = im_a * re_b - re_a * im_b
    norms = a.norm(dim=-1) * b.norm(dim=-1)
    return ((real + imaginary).sum(-1) / norms.clamp_min(1e-12)).abs()


def _pairs(embeddings: torch.Tensor, name: str) -> torch.Tensor:
    if embeddings.size(1) < 2:
        raise ValueError(f"{name} needs pairs: a second text per sample (loader pair)")
    return embeddings.float()  # float32: exponentials of bf16 differences lose the ranking


@losses.register("cosent")
class CoSENT(BiEncoderLoss):
    """CoSENT (see the module docstring)."""

    options = [SCALE, RECALL_AT, MAJOR_METRIC_RULE, BI_ENCODER_RULE, SCORED_PAIRS_RULE, *MATRYOSHKA_OPTIONS]

    def scores(self, embeddings: torch.Tensor, target: torch.Tensor | None) -> torch.Tensor:
        vectors = _pairs(embeddings, "cosent")
        cosine = F.cosine_similarity(vectors[:, 0], vectors[:, 1], dim=-1)
        return ranking_loss(cosine, target.float(), self.args.scale) * vectors.size(0)


@losses.register("angle")
class AnglE(BiEncoderLoss):
    """AnglE: CoSENT on the cosine and on the angle similarity, weighted (see the module docstring)."""

    options = [
        SCALE,
        Option("angle_scale", float, default=20.0, validate=above(0),
               doc="the scale of the angle objective (AnglE and sentence-transformers: 20)"),
        Option("cosent_weight", float, default=1.0, validate=at_least(0),
               doc="weight of the CoSENT objective on the cosine (0: the angle objective alone, as "
                   "sentence-transformers' AnglELoss)"),
        Option("angle_weight", float, default=1.0, validate=at_least(0),
               doc="weight of the angle objective"),
        Rule(lambda a: a.cosent_weight > 0 or a.angle_weight > 0, "angle: cosent_weight and angle_weight are "
             "both 0, nothing to learn: give one a positive weight", keys=("cosent_weight", "angle_weight")),
        Rule(lambda a: all(d % 2 == 0 for d in a.get("matryoshka_dims") or []),
             "angle reads each embedding as a complex vector: every width of matryoshka_dims must be even",
             keys=("loss", "matryoshka_dims")),
        RECALL_AT, MAJOR_METRIC_RULE, BI_ENCODER_RULE, SCORED_PAIRS_RULE, *MATRYOSHKA_OPTIONS,
    ]

    def scores(self, embeddings: torch.Tensor, target: torch.Tensor | None) -> torch.Tensor:
        vectors = _pairs(embeddings, "angle")
        target = target.float()
        total = vectors.new_zeros(())
        if self.args.cosent_weight > 0:
            cosine = F.cosine_similarity(vectors[:, 0], vectors[:, 1], dim=-1)
            total = total + self.args.cosent_weight * ranking_loss(cosine, target, self.args.scale)
        if self.args.angle_weight > 0:
            angle = angle_similarity(vectors[:, 0], vectors[:, 1])
            total = total + self.args.angle_weight * ranking_loss(angle, target, self.args.angle_scale)
        return total * vectors.size(0)
