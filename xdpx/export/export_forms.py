"""Export forms: a model rewritten, with the very same weights, into operations that torch.export can
capture. The parity check proves each form computes what the original model computes.

The LSTM encoder packs its padded batch (pack_padded_sequence) so that each text's backward LSTM starts at its
own last token; torch.export cannot capture packed sequences. The form below gets the same result on
the padded batch: the forward direction runs as is (padding comes after the text, so it never affects
a real position), and the backward direction runs over each text reversed within its own length.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xdpx.models.composed import EncoderHeadModel
from xdpx.models.encoders.lstm import LSTMEncoder
from xdpx.models.heads.siamese import SiameseHead
from xdpx.models.parts import Text


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


class UnpackedLSTM(nn.Module):
    """A model on the LSTM encoder (cls_lstm, lstm_ner, any head that reads states) with the packed LSTM
    replaced by :func:`padded_lstm` (eval mode only)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.bidirectional = model.text_encoder.net.lstm.bidirectional
        self.parts = unidirectional_copies(model.text_encoder.net.lstm)

    def forward(self, **net_input: Any) -> torch.Tensor:
        encoder = self.model.text_encoder
        text = encoder.text(net_input)
        lengths = text.mask.sum(dim=1).clamp(min=1)  # as the encoder does: an empty text gets one step
        states = padded_lstm(self.parts, self.bidirectional, encoder.net.dropout(encoder.embed(text)), lengths)
        return self.model.task_head.read(states, text, net_input)


class FullWidthSiamese(nn.Module):
    """The siamese head with both towers as wide as the input: the model trims them to the longest text of
    the batch (a width computed from the data, which tracing freezes and torch.export rejects); the extra
    positions are padding, masked in attention and pooling, so the outputs are the same."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, **net_input: Any) -> torch.Tensor:
        if "input_ids" not in net_input:  # the towers as tokens1 / tokens2: their widths are the inputs' own
            return self.model(**net_input)
        input_ids, token_type_ids = net_input["input_ids"], net_input["token_type_ids"]
        real = net_input["attention_mask"].bool()
        len_a = (real & (token_type_ids == 0)).sum(1)  # [CLS] a [SEP]
        len_b = (real & (token_type_ids == 1)).sum(1)  # b [SEP]
        steps = torch.arange(input_ids.size(1), device=input_ids.device)
        mask_a = steps[None, :] < len_a[:, None]
        source = (len_a[:, None] + steps[None, :] - 1).clamp(max=input_ids.size(1) - 1)
        b = torch.cat((input_ids[:, :1], torch.gather(input_ids, 1, source)[:, 1:]), dim=1)  # [CLS] b [SEP]
        mask_b = steps[None, :] < (len_b + 1)[:, None]
        mask = torch.cat((mask_a, mask_b))
        ids = torch.cat((input_ids, b)).masked_fill(~mask, 0)
        encoder, head = self.model.text_encoder, self.model.task_head
        text = Text(ids, mask.long(), torch.zeros_like(ids))
        pooled = encoder.pool(encoder.encode(text, encoder.reads_first_token_only()), text)
        # slices, not the model's chunk(2): the ONNX optimizer cannot fold a split of a dynamic batch
        u, v = pooled[: input_ids.size(0)], pooled[input_ids.size(0):]
        logits = head.classifier(head.drop(torch.cat((u, v, (u - v).abs(), u * v), dim=-1)))
        return logits.squeeze(-1) if head.num_outputs == 1 else logits


def export_form(model: nn.Module) -> nn.Module:
    """The module to trace or hand to torch.export for ``model`` (itself when it needs no rewrite)."""
    if model.training or not isinstance(model, EncoderHeadModel):
        return model
    if isinstance(model.text_encoder, LSTMEncoder) and model.task_head.needs != "texts":
        return UnpackedLSTM(model).eval()
    if isinstance(model.task_head, SiameseHead):
        return FullWidthSiamese(model).eval()
    return model
