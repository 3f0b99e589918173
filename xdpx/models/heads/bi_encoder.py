"""``head: bi_encoder``: sentence embeddings for retrieval and similarity. Every text of a sample
(``tokens1``, ``tokens2`` and, with hard negatives, ``tokens3``: processors bi_encoder / bert_bi_encoder)
goes through the same encoder on its own: the fields are padded to one length and encoded as one batch.
The output is ``[B, K, D]``: the sentence vector of each of the K texts (the encoder's pooling, mean by
default as sentence-transformers), through ``projection`` when ``projection_size`` is set, L2-normalised
with ``normalize``, so that a dot product is the cosine similarity (what the losses score and what
x-script build_index searches with inner products).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from xdpx.config.options import Option
from xdpx.config.ranges import at_least
from xdpx.models.heads import heads
from xdpx.models.parts import Encoder, Head, Text, exporting

TEXT_FIELDS = ("tokens1", "tokens2", "tokens3")
NORMALIZE = Option("normalize", bool, default=True,
                   doc="L2-normalise the embeddings (a dot product is then the cosine similarity: what the "
                       "losses score and what x-script build_index searches by); false: raw pooled vectors")


@heads.register("bi_encoder")
class BiEncoderHead(Head):
    """One shared encoder embeds each text field; ``[B, K, D]`` embeddings."""

    options = [
        Option("projection_size", int, default=None, validate=at_least(1),
               doc="a linear projection of the sentence vector to this width (null: the vector as pooled)"),
        NORMALIZE,
    ]
    needs = "texts"
    pooling_default = "mean"

    def reads_first_token_only(self) -> bool:
        return self.encoder.reads_first_token_only()

    def __init__(self, args: Any, encoder: Encoder) -> None:
        super().__init__(args, encoder)
        size = args.get("projection_size")
        self.projection = self.add("projection", nn.Linear(encoder.width, int(size))) if size else None

    def embed(self, text: Text, first_token_only: bool = False) -> torch.Tensor:
        """``[N, D]`` sentence vectors of a batch of texts (before normalisation)."""
        vectors = self.encoder.pool(self.encoder.encode(text, first_token_only), text)
        return self.projection(vectors) if self.projection is not None else vectors

    def forward(self, net_input: dict[str, Any], perturb: Any = None, first_token_only: bool = False) -> torch.Tensor:
        given = [net_input[name] for name in TEXT_FIELDS if net_input.get(name) is not None]
        if not given:
            raise ValueError("a bi-encoder needs tokens1 (and tokens2 / tokens3 for pairs and triplets)")
        pad = self.encoder.pad_index
        if len(given) == 1 or exporting():  # each field on its own: no width computed from the data
            vectors = torch.cat([self.embed(Text(t, t.ne(pad).long()), first_token_only) for t in given])
        else:
            width = max(t.size(1) for t in given)
            ids = torch.cat([F.pad(t, (0, width - t.size(1)), value=pad) for t in given])
            vectors = self.embed(Text(ids, ids.ne(pad).long()), first_token_only)
        if self.args.normalize:
            vectors = F.normalize(vectors.float(), dim=-1).to(vectors.dtype)
        return vectors.view(len(given), given[0].size(0), -1).transpose(0, 1)
