"""``head: mlm``: masked-language-model logits from every token's state: ``cls.predictions`` (transform:
dense, activation, LayerNorm; decoder tied to the word embeddings), BertForMaskedLM's names. The batch's
``masked_positions`` (bool ``[B, T]``) limits the vocabulary projection to those positions (``[N, vocab]``),
which saves most of the head's cost; without it the logits are ``[B, T, vocab]``. Encoders with an MLM
head of their own kind: our BERT.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xdpx.models.bert_layers import ACTIVATIONS
from xdpx.models.heads import heads
from xdpx.models.parts import Encoder, Head, Text


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


@heads.register("mlm")
class MLMHead(Head):
    """Masked-LM logits (processor bert_lm, loss mlm)."""

    needs = "tokens"
    hf_task = "ForMaskedLM"

    @classmethod
    def refuses(cls, encoder: type[Encoder], args: Any) -> str | None:
        if not encoder.has_mlm_head:
            return "MLM pretraining needs an encoder with a masked-LM head of its kind: encoder: bert"
        return None

    def __init__(self, args: Any, encoder: Encoder) -> None:
        super().__init__(args, encoder)
        self.cls = self.add("cls", nn.Module())
        self.cls.predictions = BertLMPredictionHead(args)

    def tie_to(self, word_embeddings: nn.Embedding) -> None:
        self.cls.predictions.decoder.weight = word_embeddings.weight
        self.cls.predictions.bias = self.cls.predictions.decoder.bias

    def mlm_logits(self, hidden: torch.Tensor, masked_positions: torch.Tensor | None) -> torch.Tensor:
        if masked_positions is not None:
            hidden = hidden[masked_positions]
        return self.cls.predictions(hidden)

    def read(self, states: torch.Tensor, text: Text, net_input: dict[str, Any]) -> Any:
        return self.mlm_logits(states, net_input.get("masked_positions"))

    def hf_config(self, config: dict[str, Any]) -> dict[str, Any]:
        return {**config, "tie_word_embeddings": True}
