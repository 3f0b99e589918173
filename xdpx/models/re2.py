"""re2: the RE2 text-matching network (Yang et al., 2019, "Simple and Effective Text Matching with
Richer Alignment Features").

The two texts pass through ``blocks`` identical stages. Each block:

1. encodes each text with a CNN and concatenates the encoder's input and output (so the alignment sees
   the original point-wise features, the encoder's contextual ones and the previous block's output);
2. aligns them: ``e_ij = F(a_i) . F(b_j)``; each token of a attends over b and vice versa;
3. fuses each token with what it aligned to: ``[a; a']``, ``[a; a - a']``, ``[a; a * a']`` through small
   feed-forward layers ('full'), or only ``[a; a']`` ('simple').

Augmented residual connections feed block n >= 2 with ``[embedding; o(n-1) + o(n-2)]``, where o(k) is
block k's output (o(0) = 0). Max pooling gives v1, v2 and the prediction layer classifies
``[v1; v2]`` ('simple'), ``[v1; v2; v1 - v2; v1 * v2]`` ('full') or ``[v1; v2; |v1 - v2|; v1 * v2]``
('symmetric': order-free comparison features, for tasks such as paraphrase).

Every step is masked, so a pair's output does not depend on the padding of its batch.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from xdpx.config.options import Option
from xdpx.config.ranges import at_least
from xdpx.models import models
from xdpx.models.modules.base import EMBEDDING_OPTIONS, Model, num_outputs
from xdpx.models.modules.embedding import Embedding
from xdpx.models.modules.encoders import ConvEncoder, FeedForward, PredictionHead
from xdpx.models.modules.pooling import masked_max, masked_softmax


class Alignment(nn.Module):
    """Soft alignment between two sequences through dot products of projected token vectors."""

    def __init__(self, dim: int, hidden_size: int, dropout: float, project: bool) -> None:
        super().__init__()
        self.projection = FeedForward(dim, hidden_size, dropout) if project else None
        # Not in the paper: dot products of wide vectors grow with the width, so a learned temperature
        # (initialised at 1/sqrt(width)) keeps the alignment softmax from saturating early in training.
        self.temperature = nn.Parameter(torch.tensor(1.0 / math.sqrt(hidden_size if project else dim)))

    def forward(self, a: torch.Tensor, b: torch.Tensor, mask_a: torch.Tensor,
                mask_b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        fa, fb = (self.projection(a), self.projection(b)) if self.projection is not None else (a, b)
        scores = torch.bmm(fa, fb.transpose(1, 2)) * self.temperature  # [B, La, Lb]
        pair_mask = mask_a.unsqueeze(2) & mask_b.unsqueeze(1)
        aligned_a = torch.bmm(masked_softmax(scores, pair_mask, dim=2), b)  # what each a_i sees in b
        aligned_b = torch.bmm(masked_softmax(scores, pair_mask, dim=1).transpose(1, 2), a)
        return aligned_a, aligned_b


class Fusion(nn.Module):
    """Compares each token with its aligned counterpart: 'full' (3 views) or 'simple' (concatenation)."""

    def __init__(self, dim: int, hidden_size: int, dropout: float, full: bool) -> None:
        super().__init__()
        self.full = full
        if full:
            self.concat = FeedForward(2 * dim, hidden_size, dropout)
            self.difference = FeedForward(2 * dim, hidden_size, dropout)
            self.product = FeedForward(2 * dim, hidden_size, dropout)
            self.merge = FeedForward(3 * hidden_size, hidden_size, dropout)
        else:
            self.merge = FeedForward(2 * dim, hidden_size, dropout)

    def forward(self, x: torch.Tensor, aligned: torch.Tensor) -> torch.Tensor:
        if not self.full:
            return self.merge(torch.cat([x, aligned], dim=-1))
        views = [
            self.concat(torch.cat([x, aligned], dim=-1)),
            self.difference(torch.cat([x, x - aligned], dim=-1)),
            self.product(torch.cat([x, x * aligned], dim=-1)),
        ]
        return self.merge(torch.cat(views, dim=-1))


class Block(nn.Module):
    """Encoder, alignment and fusion; the weights are shared between the two texts."""

    def __init__(self, in_dim: int, args: Any) -> None:
        super().__init__()
        self.encoder = ConvEncoder(in_dim, args.hidden_size, args.kernel_sizes, args.enc_layers, args.dropout)
        aligned_dim = in_dim + args.hidden_size
        self.alignment = Alignment(aligned_dim, args.hidden_size, args.dropout, args.alignment == "linear")
        self.fusion = Fusion(aligned_dim, args.hidden_size, args.dropout, args.fusion == "full")

    def forward(self, a: torch.Tensor, b: torch.Tensor, mask_a: torch.Tensor,
                mask_b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = torch.cat([a, self.encoder(a, mask_a)], dim=-1)
        b = torch.cat([b, self.encoder(b, mask_b)], dim=-1)
        aligned_a, aligned_b = self.alignment(a, b, mask_a, mask_b)
        out_a = self.fusion(a, aligned_a).masked_fill(~mask_a.unsqueeze(-1), 0.0)
        out_b = self.fusion(b, aligned_b).masked_fill(~mask_b.unsqueeze(-1), 0.0)
        return out_a, out_b


@models.register("re2")
class RE2(Model):
    """RE2 over ``net_input['tokens1']`` and ``net_input['tokens2']`` (each ``[B, L_i]``)."""

    options = [
        *EMBEDDING_OPTIONS,
        Option("hidden_size", int, default=150, validate=at_least(1),
               doc="width of the encoders, the alignment projection, the fusion layers and the head"),
        Option("blocks", int, default=2, validate=at_least(1),
               doc="number of encoder-alignment-fusion blocks (the paper uses 1 to 3)"),
        Option("enc_layers", int, default=2, validate=at_least(1),
               doc="convolution layers in each block's encoder"),
        Option("kernel_sizes", list[int], default=[3], validate=at_least(1, min_items=1),
               doc="widths of the encoder's convolution filters; hidden_size is shared among them"),
        Option("alignment", str, default="linear", choices=["linear", "identity"],
               doc="linear: align through a learned projection of the tokens (the paper); identity: plain "
                   "dot products of the token vectors"),
        Option("fusion", str, default="full", choices=["full", "simple"],
               doc="full: fuse [a; a'], [a; a - a'], [a; a * a'] separately then merge (the paper); "
                   "simple: one layer over [a; a']"),
        Option("prediction", str, default="full", choices=["simple", "full", "symmetric"],
               doc="features the classifier sees: simple [v1; v2], full [v1; v2; v1 - v2; v1 * v2], "
                   "symmetric [v1; v2; |v1 - v2|; v1 * v2] (for tasks where the order of the texts "
                   "does not matter, such as paraphrase)"),
    ]

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.pad_index = args.pad_index
        self.prediction = args.prediction
        self.embedding = Embedding(args.vocab_size, args.embedding_dim, args.pad_index,
                                   args.embedding_file, args.fix_embeddings)
        self.dropout = nn.Dropout(args.dropout)
        emb, hidden = args.embedding_dim, args.hidden_size
        self.blocks = nn.ModuleList(Block(emb if i == 0 else emb + hidden, args) for i in range(args.blocks))
        features = 2 * hidden if args.prediction == "simple" else 4 * hidden
        self.head = PredictionHead(features, hidden, num_outputs(args), args.dropout)

    @staticmethod
    def connect(embedded: torch.Tensor, previous: torch.Tensor, before_previous: torch.Tensor | float) -> torch.Tensor:
        """Augmented residual: the embeddings beside the sum of the last two block outputs.

        The sum is scaled by sqrt(1/2) so its variance stays that of one block output as blocks stack.
        """
        return torch.cat([embedded, (previous + before_previous) * math.sqrt(0.5)], dim=-1)

    def forward(self, tokens1: torch.Tensor, tokens2: torch.Tensor, **_: Any) -> torch.Tensor:
        mask_a, mask_b = tokens1.ne(self.pad_index), tokens2.ne(self.pad_index)
        emb_a, emb_b = self.dropout(self.embedding(tokens1)), self.dropout(self.embedding(tokens2))
        a, b = emb_a, emb_b
        outputs_a: list[torch.Tensor] = []
        outputs_b: list[torch.Tensor] = []
        for i, block in enumerate(self.blocks):
            if i > 0:  # o(0) = 0: block 2 sees only block 1's output beside the embeddings
                a = self.connect(emb_a, outputs_a[-1], outputs_a[-2] if i > 1 else 0.0)
                b = self.connect(emb_b, outputs_b[-1], outputs_b[-2] if i > 1 else 0.0)
            out_a, out_b = block(a, b, mask_a, mask_b)
            outputs_a.append(out_a)
            outputs_b.append(out_b)
        v1, v2 = masked_max(outputs_a[-1], mask_a), masked_max(outputs_b[-1], mask_b)
        if self.prediction == "simple":
            features = torch.cat([v1, v2], dim=-1)
        elif self.prediction == "full":
            features = torch.cat([v1, v2, v1 - v2, v1 * v2], dim=-1)
        else:
            features = torch.cat([v1, v2, (v1 - v2).abs(), v1 * v2], dim=-1)
        return self.output(self.head(features))
