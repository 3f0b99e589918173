"""``encoder: lstm``: a bidirectional LSTM over the run's own vocabulary (word embeddings -> BiLSTM).
Sequences are packed by length, so the recurrence never reads padding (the backward direction starts at
each text's last real token). Exports cannot capture packed sequences: there the LSTM runs on the padded
batch (:func:`padded_lstm`: the forward direction as is, the backward one over each text reversed within
its own length), with the same result. Slower than the CNN, better at word order and long-range cues; with the
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


def unidirectional_copies(lstm: nn.LSTM) -> nn.ModuleList:
    """One single-layer, one-direction nn.LSTM per (layer, direction) holding that part's weights."""
    directions = 2 if lstm.bidirectional else 1
    parts = nn.ModuleList()
    for layer in range(lstm.num_layers):
        for direction in range(directions):
            size = lstm.input_size if layer == 0 else lstm.hidden_size * directions
            part = nn.LSTM(size, lstm.hidden_size, batch_first=True, bias=lstm.bias)
            suffix = f"_l{layer}" + ("_reverse" if direction else "")
            with torch.no_grad():
                for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh") if lstm.bias else ("weight_ih", "weight_hh"):
                    getattr(part, f"{name}_l0").copy_(getattr(lstm, f"{name}{suffix}"))
            parts.append(part)
    return parts


def padded_lstm(parts: nn.ModuleList, bidirectional: bool, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """What pad_packed_sequence(lstm(pack_padded_sequence(x, lengths))) returns, without packing."""
    positions = torch.arange(x.size(1), device=x.device).unsqueeze(0)
    valid = positions < lengths.unsqueeze(1)  # [B, T]
    # reverse_index[b, t]: the position whose token comes t-th when text b is read backwards
    reverse_index = torch.where(valid, lengths.unsqueeze(1) - 1 - positions, positions)
    directions = 2 if bidirectional else 1
    for layer in range(len(parts) // directions):
        outputs = [parts[layer * directions](x)[0]]
        if bidirectional:
            index = reverse_index.unsqueeze(-1).expand(-1, -1, x.size(-1))
            backwards = parts[layer * directions + 1](x.gather(1, index))[0]
            outputs.append(backwards.gather(1, reverse_index.unsqueeze(-1).expand(-1, -1, backwards.size(-1))))
        x = torch.cat(outputs, dim=-1).masked_fill(~valid.unsqueeze(-1), 0.0)
    return x


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
        self.unpacked: nn.ModuleList | None = None  # one-direction copies of the LSTM while it is exported
        self.pad_index = int(args.pad_index)

    def embed(self, text: Text) -> torch.Tensor:
        return self.net.embedding(text.ids)

    def contextualize(self, embeddings: torch.Tensor, text: Text, first_token_only: bool = False) -> torch.Tensor:
        x = self.net.dropout(embeddings)
        if self.unpacked is not None:  # the export form (xdpx/export/export_forms.py): no packed sequences
            return padded_lstm(self.unpacked, self.net.lstm.bidirectional, x, text.mask.sum(dim=1).clamp(min=1))
        return bilstm_states(self.net.lstm, x, text.mask.bool())

    def pool(self, states: torch.Tensor, text: Text) -> torch.Tensor:
        return self.net.pooling(states, text.mask.bool())
