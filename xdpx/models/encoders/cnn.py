"""``encoder: cnn``: TextCNN (Kim, 2014) over the run's own vocabulary: word embeddings -> parallel
convolutions of several widths (ReLU). The token states are the filters' outputs side by side
(``len(kernel_sizes) * num_filters`` features); max over time (the default pooling) gives Kim's text
vector. Cheap to train and to serve; the fast baseline and the usual distillation student.

Padded positions are zeroed before the 'same' convolutions, so a text's states are what it gives alone.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from xdpx.config.options import Option
from xdpx.config.ranges import at_least
from xdpx.models.encoders import encoders
from xdpx.models.modules.base import EMBEDDING_OPTIONS
from xdpx.models.modules.embedding import Embedding
from xdpx.models.modules.encoders import SameConv1d
from xdpx.models.parts import Encoder, Text, pooling_option

POOLINGS = ("max", "mean")


class TextCNNModule(nn.Module):
    """The weights: ``embedding``, ``dropout``, ``convs`` (one per kernel size)."""

    def __init__(self, args: Any) -> None:
        super().__init__()
        self.embedding = Embedding(args.vocab_size, args.embedding_dim, args.pad_index, args.embedding_file,
                                   args.fix_embeddings)
        self.dropout = nn.Dropout(args.dropout)
        self.convs = nn.ModuleList(SameConv1d(args.embedding_dim, args.num_filters, k) for k in args.kernel_sizes)


@encoders.register("cnn")
class CNNEncoder(Encoder):
    """TextCNN's convolutions over ``tokens`` (or any processor's ids): states ``[B, T, K * num_filters]``."""

    options = [
        *EMBEDDING_OPTIONS,
        Option("kernel_sizes", list[int], default=[3, 4, 5], validate=at_least(1, min_items=1),
               doc="widths (in tokens) of the convolution filters; one bank of filters per width"),
        Option("num_filters", int, default=100, validate=at_least(1),
               doc="filters per kernel size; the text vector has len(kernel_sizes) * num_filters features"),
        pooling_option(POOLINGS, "max"),
    ]
    poolings = POOLINGS

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.net = self.add("encoder", TextCNNModule(args))
        self.width = len(args.kernel_sizes) * int(args.num_filters)
        self.pad_index = int(args.pad_index)

    def embed(self, text: Text) -> torch.Tensor:
        return self.net.embedding(text.ids)

    def contextualize(self, embeddings: torch.Tensor, text: Text, first_token_only: bool = False) -> torch.Tensor:
        real = text.mask.bool().unsqueeze(-1)
        x = self.net.dropout(embeddings).masked_fill(~real, 0.0).transpose(1, 2)
        return torch.cat([F.relu(conv(x)) for conv in self.net.convs], dim=1).transpose(1, 2)
