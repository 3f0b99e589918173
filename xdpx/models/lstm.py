"""cls_lstm: a bidirectional LSTM with max / mean / attention pooling, for single-text tasks.

Sequences are packed by length, so the recurrence never reads padding (the backward direction starts
at each text's real last token). Slower than cls_cnn but better at word order and long-range cues.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from xdpx.config.options import Option
from xdpx.config.ranges import at_least
from xdpx.models import models
from xdpx.models.modules.base import EMBEDDING_OPTIONS, Model, num_outputs
from xdpx.models.modules.embedding import Embedding
from xdpx.models.modules.encoders import PredictionHead
from xdpx.models.modules.pooling import Pooling


def bilstm_layers(args: Any) -> tuple[Embedding, nn.Dropout, nn.LSTM]:
    """The embedding, dropout and bidirectional LSTM of the LSTM models (cls_lstm, lstm_ner), built in this
    order (the order the initial weights are drawn in)."""
    embedding = Embedding(args.vocab_size, args.embedding_dim, args.pad_index, args.embedding_file,
                          args.fix_embeddings)
    dropout = nn.Dropout(args.dropout)
    lstm = nn.LSTM(args.embedding_dim, args.hidden_size, num_layers=args.num_layers,
                   dropout=args.dropout if args.num_layers > 1 else 0.0, batch_first=True, bidirectional=True)
    return embedding, dropout, lstm


def bilstm_states(lstm: nn.LSTM, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The LSTM's states ``[B, T, 2H]`` over the real tokens only (packed), zero at padding."""
    # An empty text still gets one (padding) step: packing rejects zero lengths.
    lengths = mask.sum(dim=1).clamp(min=1).cpu()
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    states, _ = pad_packed_sequence(lstm(packed)[0], batch_first=True, total_length=x.size(1))
    return states


@models.register("cls_lstm")
class BiLSTMClassifier(Model):
    """BiLSTM over ``net_input['tokens']`` ``[B, L]``, pooled to one vector, then a 2-layer head."""

    options = [
        *EMBEDDING_OPTIONS,
        Option("hidden_size", int, default=200, validate=at_least(1),
               doc="LSTM units per direction (the text vector has 2 * hidden_size features)"),
        Option("num_layers", int, default=1, validate=at_least(1),
               doc="stacked LSTM layers"),
        Option("pooling", str, default="max", choices=["max", "mean", "attention"],
               doc="how the token states become one vector: max or mean over real tokens, or a learned "
                   "attention-weighted average"),
    ]

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.pad_index = args.pad_index
        self.embedding, self.dropout, self.lstm = bilstm_layers(args)
        self.pooling = Pooling(args.pooling, 2 * args.hidden_size)
        self.head = PredictionHead(2 * args.hidden_size, args.hidden_size, num_outputs(args), args.dropout)

    def forward(self, tokens: torch.Tensor, **_: Any) -> torch.Tensor:
        mask = tokens.ne(self.pad_index)
        states = bilstm_states(self.lstm, self.dropout(self.embedding(tokens)), mask)
        return self.output(self.head(self.pooling(states, mask)))
