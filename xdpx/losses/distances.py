"""Bi-encoder losses on distances between the two or three texts of a sample:

- ``triplet`` (Schroff et al., 2015): an anchor (the query), its positive and a negative (the triplet
  loader's third text): ``max(d(a, p) - d(a, n) + margin, 0)`` per sample, summed: the negative must be
  ``margin`` farther from the anchor than the positive.
- ``contrastive`` (Hadsell, Chopra and LeCun, 2006): pairs with a label 1 (similar) or 0 (dissimilar):
  ``y * d^2 / 2 + (1 - y) * max(margin - d, 0)^2 / 2`` per pair, summed: similar pairs are pulled
  together, dissimilar ones pushed at least ``margin`` apart.

``distance``: ``cosine`` (1 - cos(u, v), in [0, 2]) or ``euclidean`` (||u - v||), as in
sentence-transformers' TripletLoss / ContrastiveLoss.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from xdpx.config.options import Option, Rule
from xdpx.config.ranges import above
from xdpx.errors import UserError
from xdpx.losses import losses
from xdpx.losses.bi_encoder import BI_ENCODER_RULE, MAJOR_METRIC_RULE, RECALL_AT, BiEncoderLoss
from xdpx.losses.matryoshka import MATRYOSHKA_OPTIONS


def distance_option(default_margin_doc: str) -> Option:
    return Option("distance", str, default="cosine", choices=("cosine", "euclidean"),
                  doc=f"the distance of two embeddings: cosine (1 - cosine similarity) or euclidean. {default_margin_doc}")


def distance(u: torch.Tensor, v: torch.Tensor, kind: str) -> torch.Tensor:
    """Row-wise distance ``[B]`` of ``u`` and ``v`` ``[B, D]``."""
    if kind == "euclidean":
        return (u - v).norm(dim=-1)
    return 1.0 - F.cosine_similarity(u, v, dim=-1)


@losses.register("triplet")
class Triplet(BiEncoderLoss):
    """max(d(anchor, positive) - d(anchor, negative) + margin, 0), summed over the batch."""

    options = [
        distance_option("sentence-transformers uses euclidean with margin 5, cosine with a margin below 1"),
        Option("margin", float, default=0.5, validate=above(0),
               doc="how much farther than the positive the negative must be from the anchor (a cosine distance "
                   "is at most 2: a margin of 2 or more can never be met; euclidean margins grow with the width)"),
        Rule(lambda a: a.get("loader") == "triplet", "triplet needs an anchor, a positive and a negative per "
             "sample: prepare the data with loader: triplet (query, positive, negative columns)",
             keys=("loss", "loader")),
        Rule(lambda a: a.distance != "cosine" or a.margin < 2, "triplet: a cosine distance is at most 2, so "
             "margin >= 2 can never be met: use a margin below 2 (e.g. 0.5)", keys=("margin", "distance")),
        RECALL_AT, MAJOR_METRIC_RULE, BI_ENCODER_RULE, *MATRYOSHKA_OPTIONS,
    ]

    def scores(self, embeddings: torch.Tensor, target: torch.Tensor | None) -> torch.Tensor:
        if embeddings.size(1) < 3:
            raise ValueError("triplet needs a negative per sample: a third text (loader triplet)")
        vectors = embeddings.float()
        anchor, positive, negative = vectors[:, 0], vectors[:, 1], vectors[:, 2]
        kind = self.args.distance
        gap = distance(anchor, positive, kind) - distance(anchor, negative, kind) + self.args.margin
        return gap.clamp_min(0).sum()


@losses.register("contrastive")
class Contrastive(BiEncoderLoss):
    """y d^2 / 2 + (1 - y) max(margin - d, 0)^2 / 2 per pair, summed (Hadsell et al.)."""

    options = [
        distance_option("sentence-transformers' ContrastiveLoss: cosine, margin 0.5"),
        Option("margin", float, default=0.5, validate=above(0),
               doc="dissimilar pairs (label 0) closer than this are pushed apart; farther ones cost nothing"),
        Rule(lambda a: a.target_type == "regression" and a.get("loader") != "triplet",
             "contrastive reads pairs labelled 1 (similar) or 0 (dissimilar): prepare loader pair with the "
             "label column and target_type: regression (the labels are read as the numbers 0 and 1)",
             keys=("loss", "target_type", "loader")),
        RECALL_AT, MAJOR_METRIC_RULE, BI_ENCODER_RULE, *MATRYOSHKA_OPTIONS,
    ]

    def scores(self, embeddings: torch.Tensor, target: torch.Tensor | None) -> torch.Tensor:
        if embeddings.size(1) < 2:
            raise ValueError("contrastive needs pairs: a second text per sample (loader pair)")
        labels = target.float()
        if not bool(((labels == 0) | (labels == 1)).all()):
            bad = labels[(labels != 0) & (labels != 1)][0].item()
            raise UserError(f"contrastive reads labels 1 (similar) or 0 (dissimilar), got {bad:g}: relabel the "
                             "pairs (e.g. 1 for an STS score >= 4, 0 otherwise)")
        vectors = embeddings.float()
        d = distance(vectors[:, 0], vectors[:, 1], self.args.distance)
        return 0.5 * (labels * d.pow(2) + (1 - labels) * (self.args.margin - d).clamp_min(0).pow(2)).sum()
