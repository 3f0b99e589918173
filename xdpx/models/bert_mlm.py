"""BERT's masked-language-model heads: ``bert_lm`` (BertForMaskedLM) and ``bert_pretrain`` (MLM plus
sentence-order prediction, BertForPreTraining's keys). The decoder is tied to the word embeddings."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xdpx.models import models
from xdpx.models.bert_base import BertBase
from xdpx.models.bert_layers import ACTIVATIONS


class BertLMPredictionHead(nn.Module):
    """cls.predictions: transform (dense, act, LayerNorm), decoder tied to the word embeddings, bias."""

    def __init__(self, c: Any) -> None:
        super().__init__()
        self.transform = nn.Module()
        self.transform.dense = nn.Linear(c.hidden_size, c.hidden_size)
        self.transform.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.act = ACTIVATIONS[c.hidden_act]
        self.decoder = nn.Linear(c.hidden_size, c.vocab_size)
        self.bias = self.decoder.bias  # HF keeps both names for one tensor

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        h = self.transform.LayerNorm(self.act(self.transform.dense(hidden)))
        return self.decoder(h)


class BertMLMBase(BertBase):
    """An MLM head on the encoder. ``masked_positions`` (bool ``[B, T]``) limits the vocabulary projection
    to those positions (``[N, vocab]``): the MLM loss passes its targets' positions, which saves most of
    the head's cost; without it the logits are ``[B, T, vocab]``."""

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.cls = nn.Module()
        self.cls.predictions = BertLMPredictionHead(args)

    def tie_weights(self) -> None:
        self.cls.predictions.decoder.weight = self.bert.embeddings.word_embeddings.weight
        self.cls.predictions.bias = self.cls.predictions.decoder.bias

    def mlm_logits(self, hidden: torch.Tensor, masked_positions: torch.Tensor | None) -> torch.Tensor:
        if masked_positions is not None:
            hidden = hidden[masked_positions]
        return self.cls.predictions(hidden)

    def hf_config(self) -> dict[str, Any]:
        return {**super().hf_config(), "tie_word_embeddings": True}


@models.register("bert_lm")
class BertForMaskedLM(BertMLMBase):
    """Masked-language model (processor bert_lm, loss mlm); keys of transformers' BertForMaskedLM."""

    hf_architecture = "BertForMaskedLM"
    add_pooler = False

    def upper_predict(self, embeddings: torch.Tensor, attention_mask: torch.Tensor,
                      masked_positions: torch.Tensor | None = None, **_: Any) -> torch.Tensor:
        return self.mlm_logits(self.bert.encode(embeddings, attention_mask), masked_positions)


@models.register("bert_pretrain")
class BertForPreTraining(BertMLMBase):
    """MLM plus sentence-order prediction (ALBERT's SOP; processor bert_pretrain, loss mlm_sop): returns
    ``(mlm_logits, sop_logits [B, 2])``; keys of BertForPreTraining (cls.seq_relationship = SOP head)."""

    hf_architecture = "BertForPreTraining"

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.cls.seq_relationship = nn.Linear(args.hidden_size, 2)

    def upper_predict(self, embeddings: torch.Tensor, attention_mask: torch.Tensor,
                      masked_positions: torch.Tensor | None = None, **_: Any) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.bert.encode(embeddings, attention_mask)
        return self.mlm_logits(hidden, masked_positions), self.cls.seq_relationship(self.bert.pooler(hidden))
