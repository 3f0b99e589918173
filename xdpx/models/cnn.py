"""cls_cnn: TextCNN (Kim, 2014) for single-text classification or regression.

Embeddings -> parallel convolutions of several widths (ReLU) -> max over time -> dropout -> linear.
Cheap to train and to serve; a strong baseline for short texts such as reviews or queries.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from xdpx.config.options import Option
from xdpx.config.ranges import at_least
from xdpx.models import models
from xdpx.models.modules.base import EMBEDDING_OPTIONS, Model, num_outputs
from xdpx.models.modules.embedding import Embedding
from xdpx.models.modules.encoders import SameConv1d
from xdpx.models.modules.pooling import masked_max


@models.register("cls_cnn")
class TextCNN(Model):
    """TextCNN over ``net_input['tokens']`` ``[B, L]``: n-gram detectors pooled over the whole text."""

    options = [
        *EMBEDDING_OPTIONS,
        Option("kernel_sizes", list[int], default=[3, 4, 5], validate=at_least(1, min_items=1),
               doc="widths (in tokens) of the convolution filters; one bank of filters per width"),
        Option("num_filters", int, default=100, validate=at_least(1),
               doc="filters per kernel size; the text vector has len(kernel_sizes) * num_filters features"),
    ]

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.pad_index = args.pad_index
        self.embedding = Embedding(args.vocab_size, args.embedding_dim, args.pad_index,
                                   args.embedding_file, args.fix_embeddings)
        self.convs = nn.ModuleList(
            SameConv1d(args.embedding_dim, args.num_filters, kernel) for kernel in args.kernel_sizes
        )
        self.dropout = nn.Dropout(args.dropout)
        self.out = nn.Linear(len(args.kernel_sizes) * args.num_filters, num_outputs(args))

    def forward(self, tokens: torch.Tensor, **_: Any) -> torch.Tensor:
        mask = tokens.ne(self.pad_index)
        x = self.dropout(self.embedding(tokens))
        # Zero the padded positions: 'same' padding then sees exactly what an unpadded batch sees.
        x = x.masked_fill(~mask.unsqueeze(-1), 0.0).transpose(1, 2)
        features = [masked_max(F.relu(conv(x)).transpose(1, 2), mask) for conv in self.convs]
        return self.output(self.out(self.dropout(torch.cat(features, dim=-1))))
