"""Bi-encoders for sentence embeddings and retrieval: one shared encoder embeds every text of a sample
on its own (``tokens1``, ``tokens2`` and, with hard negatives, ``tokens3``: processors bi_encoder /
bert_bi_encoder). ``forward`` returns the embeddings ``[B, K, D]`` of the K texts given, L2-normalised
when ``normalize`` is on, so that a dot product is the cosine similarity (what the losses score, and what
x-script build_index searches with inner products).

- ``bert_bi_encoder``: our BERT (any BERT checkpoint, e.g. all-MiniLM-L6-v2) with mean or [CLS] pooling of
  the last layer, as sentence-transformers and DPR do;
- ``bi_encoder``: a fast non-transformer encoder (word embeddings, a 1-D convolution, max/mean pooling and
  a projection), trained from scratch on the run's own vocabulary.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from xdpx.config.options import Option
from xdpx.config.ranges import at_least
from xdpx.models import models
from xdpx.models.bert_base import BertBase
from xdpx.models.bert_layers import mean_pool
from xdpx.models.modules.base import EMBEDDING_OPTIONS
from xdpx.models.modules.embedding import Embedding
from xdpx.models.modules.pooling import Pooling

TEXT_FIELDS = ("tokens1", "tokens2", "tokens3")
NORMALIZE = Option("normalize", bool, default=True,
                   doc="L2-normalise the embeddings (a dot product is then the cosine similarity: what the "
                       "losses score and what x-script build_index searches by); false: raw pooled vectors")


def stack_texts(embed: Any, fields: dict[str, torch.Tensor | None], normalize: bool) -> torch.Tensor:
    """``[B, K, D]``: ``embed(tokens)`` of each text field given, in order, through one encoder call (the
    fields are padded to one length and encoded as one batch: the same weights, one pass)."""
    given = [fields[name] for name in TEXT_FIELDS if fields.get(name) is not None]
    if not given:
        raise ValueError("a bi-encoder needs tokens1 (and tokens2 / tokens3 for pairs and triplets)")
    width = max(t.size(1) for t in given)
    padded = torch.cat([F.pad(t, (0, width - t.size(1)), value=embed.pad_index) for t in given])
    vectors = embed(padded)
    if normalize:
        vectors = F.normalize(vectors.float(), dim=-1).to(vectors.dtype)
    return vectors.view(len(given), given[0].size(0), -1).transpose(0, 1)


@models.register("bert_bi_encoder")
class BertBiEncoder(BertBase):
    """BERT as the shared encoder of a bi-encoder (processor bert_bi_encoder)."""

    options = [*BertBase.options,
               Option("pooling", str, default="mean", choices=("mean", "cls"),
                      doc="the text vector: mean of the last layer over real tokens (sentence-transformers' "
                          "choice, all-MiniLM-L6-v2's) or the last layer at [CLS] (DPR's)"),
               NORMALIZE]
    add_pooler = False

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.pad_index = args.pad_index

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        mask = tokens.ne(self.pad_index).long()
        hidden = self.bert.encode(self.bert.embeddings(tokens, torch.zeros_like(tokens)), mask,
                                  self.args.pooling == "cls")
        return hidden[:, 0] if self.args.pooling == "cls" else mean_pool(hidden, mask)

    def forward(self, tokens1: torch.Tensor | None = None, tokens2: torch.Tensor | None = None,
                tokens3: torch.Tensor | None = None, **_: Any) -> torch.Tensor:
        return stack_texts(_Embed(self.embed, self.pad_index),
                           {"tokens1": tokens1, "tokens2": tokens2, "tokens3": tokens3}, self.args.normalize)


class _Embed:
    """A text encoder function with the pad index its inputs are padded with."""

    def __init__(self, function: Any, pad_index: int) -> None:
        self.function, self.pad_index = function, pad_index

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.function(tokens)


@models.register("bi_encoder")
class ConvBiEncoder(nn.Module):
    """Word embeddings, one 1-D convolution (kernel 3, same length), max or mean pooling over real tokens
    and a linear projection: a fast shared encoder trained from scratch (processor bi_encoder)."""

    options = [
        *EMBEDDING_OPTIONS,
        Option("hidden_size", int, default=256, validate=at_least(1), doc="convolution channels"),
        Option("embedding_size", int, default=256, validate=at_least(1), doc="width of the text embeddings"),
        Option("pooling", str, default="max", choices=("max", "mean"),
               doc="how the convolution's token states become one vector (over real tokens)"),
        NORMALIZE,
    ]

    def __init__(self, args: Any) -> None:
        super().__init__()
        self.args, self.pad_index = args, args.pad_index
        self.embedding = Embedding(args.vocab_size, args.embedding_dim, args.pad_index, args.embedding_file,
                                   args.fix_embeddings)
        self.dropout = nn.Dropout(args.dropout)
        self.conv = nn.Conv1d(args.embedding_dim, args.hidden_size, kernel_size=3, padding=1)
        self.pooling = Pooling(args.pooling, args.hidden_size)
        self.projection = nn.Linear(args.hidden_size, args.embedding_size)

    @classmethod
    def build(cls, args: Any) -> ConvBiEncoder:
        return cls(args)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        mask = tokens.ne(self.pad_index)
        x = self.dropout(self.embedding(tokens))
        states = torch.relu(self.conv(x.transpose(1, 2))).transpose(1, 2)
        return self.projection(self.pooling(states, mask))

    def forward(self, tokens1: torch.Tensor | None = None, tokens2: torch.Tensor | None = None,
                tokens3: torch.Tensor | None = None, **_: Any) -> torch.Tensor:
        return stack_texts(_Embed(self.embed, self.pad_index),
                           {"tokens1": tokens1, "tokens2": tokens2, "tokens3": tokens3}, self.args.normalize)
