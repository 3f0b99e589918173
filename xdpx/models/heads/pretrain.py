"""``head: pretrain``: MLM plus sentence-order prediction (ALBERT's SOP; processor bert_pretrain, loss
mlm_sop): ``(mlm_logits, sop_logits [B, 2])``, BertForPreTraining's names (``cls.seq_relationship`` is the
sentence-order classifier over the pooler, which the encoder builds for this head)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xdpx.models.heads import heads
from xdpx.models.heads.mlm import MLMHead
from xdpx.models.parts import Encoder, Text


@heads.register("pretrain")
class PretrainHead(MLMHead):
    """Masked-LM logits and the sentence-order logits of the pooled [CLS]."""

    needs_pooler = True
    hf_task = "ForPreTraining"

    def __init__(self, args: Any, encoder: Encoder) -> None:
        super().__init__(args, encoder)
        self.cls.seq_relationship = nn.Linear(args.hidden_size, 2)

    def read(self, states: torch.Tensor, text: Text, net_input: dict[str, Any]) -> Any:
        pooled = self.encoder.bert.pooler(states)
        return self.mlm_logits(states, net_input.get("masked_positions")), self.cls.seq_relationship(pooled)
