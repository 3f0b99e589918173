"""match_cnn: a siamese CNN matcher for sentence pairs (paraphrase, matching, similarity).

Both texts go through the same embedding and convolutional encoder, are pooled to vectors a and b, and
a head classifies ``[a, b, |a - b|, a * b]``. Fast, symmetric in its encoder, and a solid baseline
before re2, which adds cross-sentence alignment.
"""

from __future__ import annotations

from typing import Any

import torch

from xdpx.config.options import Option
from xdpx.config.ranges import at_least
from xdpx.models import models
from xdpx.models.modules.base import EMBEDDING_OPTIONS, Model, num_outputs
from xdpx.models.modules.embedding import Embedding
from xdpx.models.modules.encoders import ConvEncoder, PredictionHead
from xdpx.models.modules.pooling import Pooling


@models.register("match_cnn")
class SiameseCNN(Model):
    """Siamese CNN over ``net_input['tokens1']`` and ``net_input['tokens2']`` (each ``[B, L_i]``)."""

    options = [
        *EMBEDDING_OPTIONS,
        Option("hidden_size", int, default=200, validate=at_least(1),
               doc="width of the convolutional encoder and of the prediction head"),
        Option("kernel_sizes", list[int], default=[3], validate=at_least(1, min_items=1),
               doc="widths of the convolution filters; hidden_size is shared among them"),
        Option("enc_layers", int, default=2, validate=at_least(1),
               doc="stacked convolution layers in the encoder"),
        Option("pooling", str, default="max", choices=["max", "mean", "attention"],
               doc="how token states become one vector per text"),
    ]

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.pad_index = args.pad_index
        self.embedding = Embedding(args.vocab_size, args.embedding_dim, args.pad_index,
                                   args.embedding_file, args.fix_embeddings)
        self.encoder = ConvEncoder(args.embedding_dim, args.hidden_size, args.kernel_sizes, args.enc_layers,
                                   args.dropout)
        self.pooling = Pooling(args.pooling, args.hidden_size)
        self.head = PredictionHead(4 * args.hidden_size, args.hidden_size, num_outputs(args), args.dropout)

    def encode(self, tokens: torch.Tensor) -> torch.Tensor:
        mask = tokens.ne(self.pad_index)
        return self.pooling(self.encoder(self.embedding(tokens), mask), mask)

    def forward(self, tokens1: torch.Tensor, tokens2: torch.Tensor, **_: Any) -> torch.Tensor:
        a, b = self.encode(tokens1), self.encode(tokens2)
        return self.output(self.head(torch.cat([a, b, (a - b).abs(), a * b], dim=-1)))
