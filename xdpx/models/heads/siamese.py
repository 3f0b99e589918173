"""``head: siamese``: two texts through the same encoder as two towers, pooled to u and v, classified (or
scored, regression) from ``[u, v, |u - v|, u * v]`` (Reimers & Gurevych, 2019). The two texts come as a
bi-encoder's ``tokens1`` / ``tokens2`` fields, or as one pair sequence (processor bert_pair) that is split
by token type into ``[CLS] a [SEP]`` and ``[CLS] b [SEP]``: both towers run in one batch of 2B rows.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from xdpx.models.heads import heads
from xdpx.models.heads.classification import CLASSIFIER_DROPOUT, head_dropout
from xdpx.models.modules.base import num_outputs
from xdpx.models.parts import Encoder, Head, Text, exporting


def split_towers(input_ids: torch.Tensor, token_type_ids: torch.Tensor | None,
                 attention_mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """[CLS] a [SEP] b [SEP] rows -> ``[2B, T']`` ids ([CLS] a [SEP] rows, then [CLS] b [SEP] rows) and mask."""
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    if token_type_ids is None:
        raise ValueError("the siamese head splits a pair by token_type_ids (processor bert_pair), or reads the "
                         "two texts as tokens1 / tokens2 (processor bert_bi_encoder)")
    real = attention_mask.bool()
    len_a = (real & (token_type_ids == 0)).sum(1)  # [CLS] a [SEP]
    len_b = (real & (token_type_ids == 1)).sum(1)  # b [SEP]
    width = int(torch.maximum(len_a, len_b + 1).max())
    steps = torch.arange(width, device=input_ids.device)
    a = input_ids[:, :width] if input_ids.size(1) >= width else F.pad(input_ids, (0, width - input_ids.size(1)))
    mask_a = steps[None, :] < len_a[:, None]
    # tower b: [CLS] then the ids from position len_a on
    source = (len_a[:, None] + steps[None, :] - 1).clamp(max=input_ids.size(1) - 1)
    b = torch.gather(input_ids, 1, source)
    b[:, 0] = input_ids[:, 0]
    mask_b = steps[None, :] < (len_b + 1)[:, None]
    ids = torch.cat((a, b)).masked_fill(~torch.cat((mask_a, mask_b)), 0)
    return ids, torch.cat((mask_a, mask_b)).long()


@heads.register("siamese")
class SiameseHead(Head):
    """Two towers of one encoder, classified from ``[u, v, |u - v|, u * v]``."""

    options = [CLASSIFIER_DROPOUT]
    pooling_default = "mean"
    needs = "texts"
    hf_task = "Siamese"  # not a transformers class: export_hf has none for it

    def reads_first_token_only(self) -> bool:
        return self.encoder.reads_first_token_only()

    def __init__(self, args: Any, encoder: Encoder) -> None:
        super().__init__(args, encoder)
        self.num_outputs = num_outputs(args)
        self.drop = self.add("dropout", head_dropout(args, encoder))
        self.classifier = self.add("classifier", nn.Linear(4 * encoder.width, self.num_outputs))

    def pooled(self, text: Text, perturb: Any, first_token_only: bool) -> torch.Tensor:
        embeddings = self.encoder.embed(text)
        if perturb is not None:
            embeddings = perturb(embeddings, text.mask)
        return self.encoder.pool(self.encoder.contextualize(embeddings, text, first_token_only), text)

    def towers(self, net_input: dict[str, Any]) -> Text:
        if "tokens1" in net_input:
            # one batch of 2B rows, padded to the longer field (tracing would freeze that width: exports run
            # each tower on its own, forward below)
            width = max(net_input["tokens1"].size(1), net_input["tokens2"].size(1))
            ids = torch.cat([F.pad(net_input[f], (0, width - net_input[f].size(1)), value=self.encoder.pad_index)
                             for f in ("tokens1", "tokens2")])
            return Text(ids, ids.ne(self.encoder.pad_index).long())
        ids, mask = split_towers(net_input["input_ids"], net_input.get("token_type_ids"),
                                 net_input.get("attention_mask"))
        return Text(ids, mask, torch.zeros_like(ids))

    def forward(self, net_input: dict[str, Any], perturb: Any = None, first_token_only: bool = False) -> torch.Tensor:
        if "tokens1" in net_input and exporting():
            u, v = (self.pooled(self.encoder.text(net_input, field), None, first_token_only)
                    for field in ("tokens1", "tokens2"))
        else:
            u, v = self.pooled(self.towers(net_input), perturb, first_token_only).chunk(2)
        logits = self.classifier(self.drop(torch.cat((u, v, (u - v).abs(), u * v), dim=-1)))
        return logits.squeeze(-1) if self.num_outputs == 1 else logits
