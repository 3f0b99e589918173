"""``encoder: lstm``: a bidirectional LSTM over the run's own vocabulary (word embeddings -> BiLSTM).
Sequences are packed by length, so the recurrence never reads padding (the backward direction starts at
each text's last real token). Slower than the CNN, better at word order and long-range cues; with the
tagging head it is the BiLSTM(-CRF) tagger of Lample et al. (2016).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from xdpx.config.options import Option
from xdpx.config.ranges import at_least
from xdpx.models.encoders import encoders
from xdpx.models.modules.base import EMBEDDING_OPTIONS
from xdpx.models.modules.embedding import Embedding
from xdpx.models.modules.pooling import Pooling
from xdpx.models.parts import Encoder, Text, pooling_option

POOLINGS = ("max", "mean", "attention")


def bilstm_states(lstm: nn.LSTM, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The LSTM's states ``[B, T, 2H]`` over the real tokens only (packed), zero at padding."""
    # An empty text still gets one (padding) step: packing rejects zero lengths.
    lengths = mask.sum(dim=1).clamp(min=1).cpu()
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    states, _ = pad_packed_sequence(lstm(packed)[0], batch_first=True, total_length=x.size(1))
    return states


class BiLSTMModule(nn.Module):
    """The weights: ``embedding``, ``dropout``, ``lstm`` and, for attention pooling, ``pooling``; built
    in this order (the order the initial weights are drawn in)."""

    def __init__(self, args: Any) -> None:
        super().__init__()
        self.embedding = Embedding(args.vocab_size, args.embedding_dim, args.pad_index, args.embedding_file,
                                   args.fix_embeddings)
        self.dropout = nn.Dropout(args.dropout)
        self.lstm = nn.LSTM(args.embedding_dim, args.hidden_size, num_layers=args.num_layers,
                            dropout=args.dropout if args.num_layers > 1 else 0.0, batch_first=True,
                            bidirectional=True)
        self.pooling = Pooling(args.pooling, 2 * args.hidden_size)


@encoders.register("lstm")
class LSTMEncoder(Encoder):
    """BiLSTM states ``[B, T, 2 * hidden_size]`` (``lstm_export_form`` in xdpx/export replaces the packing)."""

    options = [
        *EMBEDDING_OPTIONS,
        Option("hidden_size", int, default=200, validate=at_least(1),
               doc="LSTM units per direction (the states have 2 * hidden_size features)"),
        Option("num_layers", int, default=1, validate=at_least(1), doc="stacked LSTM layers"),
        pooling_option(POOLINGS, "max"),
    ]
    poolings = POOLINGS

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.net = self.add("encoder", BiLSTMModule(args))
        self.width = 2 * int(args.hidden_size)
        self.pad_index = int(args.pad_index)

    def embed(self, text: Text) -> torch.Tensor:
        return self.net.embedding(text.ids)

    def contextualize(self, embeddings: torch.Tensor, text: Text, first_token_only: bool = False) -> torch.Tensor:
        return bilstm_states(self.net.lstm, self.net.dropout(embeddings), text.mask.bool())

    def pool(self, states: torch.Tensor, text: Text) -> torch.Tensor:
        return self.net.pooling(states, text.mask.bool())
