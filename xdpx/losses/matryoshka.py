"""Matryoshka training of the bi-encoder losses (Kusupati et al., 2022): the loss is applied to the
embeddings cut to their first d dimensions for each d of ``matryoshka_dims`` and the weighted losses are
summed, so that a prefix of the vector is an embedding of its own. The evaluation reports the retrieval
metrics of each width with the width after ``@`` (``recall_at_10@64``, ``mrr@64``: the cosines of the
vectors cut to the width), beside the metrics of the full vector, so a user sees what each width costs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from xdpx.config.options import Option, Rule
from xdpx.config.ranges import above, at_least

MATRYOSHKA_OPTIONS = [
    Option("matryoshka_dims", list[int] | None, default=None, validate=at_least(1, min_items=1),
           doc="widths to train at once (Matryoshka): the loss is applied to the first d dimensions of each "
               "embedding for each d and the weighted losses summed; evaluation adds the retrieval metrics "
               "of each width as <metric>@<d> (recall_at_10@64). null: the full width alone"),
    Option("matryoshka_weights", list[float] | None, default=None, validate=above(0, min_items=1),
           doc="the weight of each width of matryoshka_dims, in the same order (null: 1 each)"),
    Rule(lambda a: a.get("matryoshka_weights") is None
         or len(a.matryoshka_weights) == len(a.get("matryoshka_dims") or []),
         "matryoshka_weights needs one weight per width of matryoshka_dims (and matryoshka_dims set)",
         keys=("matryoshka_weights", "matryoshka_dims")),
    Rule(lambda a: len(set(a.get("matryoshka_dims") or [])) == len(a.get("matryoshka_dims") or []),
         "matryoshka_dims lists a width twice: give each width once", keys=("matryoshka_dims",)),
    Rule(lambda a: a.get("hidden_size") is None or a.get("pretrained_model")
         or all(d <= a.hidden_size for d in a.get("matryoshka_dims") or []),
         lambda a: f"matryoshka_dims: each width must be at most the embedding width (hidden_size "
                   f"{a.hidden_size}), got {max(a.matryoshka_dims)}", keys=("matryoshka_dims", "hidden_size")),
]


def widths(args: Any) -> list[tuple[int, float]]:
    """(width, weight) pairs of the Matryoshka option; empty without it."""
    dims = list(args.get("matryoshka_dims") or [])
    weights = list(args.get("matryoshka_weights") or [1.0] * len(dims))
    return list(zip(dims, weights))


def check_width(embeddings: torch.Tensor, dim: int) -> None:
    if dim > embeddings.size(-1):
        raise ValueError(f"matryoshka_dims: width {dim} is wider than the embeddings ({embeddings.size(-1)})")


def over_widths(loss: Callable[[torch.Tensor], torch.Tensor], embeddings: torch.Tensor,
                args: Any) -> torch.Tensor:
    """``loss(embeddings)`` at the full width, or the weighted sum of ``loss`` at each Matryoshka width."""
    pairs = widths(args)
    if not pairs:
        return loss(embeddings)
    total = embeddings.new_zeros((), dtype=torch.float32)
    for dim, weight in pairs:
        check_width(embeddings, dim)
        total = total + weight * loss(embeddings[..., :dim])
    return total

