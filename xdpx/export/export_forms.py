"""Export forms: a model rewritten, with the very same weights, into operations that torch.export can
capture. The parity check proves each form computes what the original model computes.

The LSTM encoder packs its padded batch (pack_padded_sequence) so that each text's backward LSTM starts at its
own last token; torch.export cannot capture packed sequences: its export form runs the LSTM unpacked
(xdpx.models.encoders.lstm.padded_lstm, the same result on the padded batch).
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from xdpx.models.composed import EncoderHeadModel
from xdpx.models.encoders.lstm import LSTMEncoder, unidirectional_copies
from xdpx.models.heads.siamese import SiameseHead
from xdpx.models.parts import Text


class UnpackedLSTM(nn.Module):
    """A model on the LSTM encoder (cls_lstm, lstm_ner, any head) whose LSTM runs as
    :func:`xdpx.models.encoders.lstm.padded_lstm` over one-direction copies of its weights (eval mode only)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.parts = unidirectional_copies(model.text_encoder.net.lstm)
        # copies of the parts (the same modules) whose encoder runs unpacked: the model itself is unchanged
        encoder = copy.copy(model.text_encoder)
        encoder.unpacked = self.parts
        self.head = copy.copy(model.task_head)
        self.head.encoder = encoder

    def forward(self, **net_input: Any) -> Any:
        return self.head.forward(net_input, None, self.model.reads_first_token_only())


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
    if isinstance(model.text_encoder, LSTMEncoder):
        return UnpackedLSTM(model).eval()
    if isinstance(model.task_head, SiameseHead):
        return FullWidthSiamese(model).eval()
    return model
