"""BERT (Devlin et al., 2019): our own readable implementation whose parameter names are Hugging Face's,
so real checkpoints load key for key (state_dict keys == transformers' BertFor* models).

    embeddings (word + position + token type, LayerNorm, dropout)
    -> num_hidden_layers x [self-attention (SDPA) -> add & norm -> feed-forward -> add & norm]
    -> pooler (tanh dense over [CLS])  -> heads

Registered models (forward arguments: input_ids, token_type_ids, attention_mask, all ``[B, T]``):

- ``bert_classification`` / ``bert_pair``: logits ``[B, num_classes]`` (``[B]`` for regression); keys
  of BertForSequenceClassification.
- ``bert_siamese``: the bert_pair processor's fields; both texts go through the same encoder as two
  towers (split by token type), then a classifier over ``[u, v, |u - v|, u * v]``.
- ``bert_lm``: MLM logits ``[B, T, vocab]`` (keys of BertForMaskedLM, decoder tied to the embeddings).
- ``bert_pretrain``: MLM plus sentence-order prediction: ``(mlm_logits, sop_logits [B, 2])``; keys of
  BertForPreTraining (``cls.seq_relationship`` is the sentence-order head).

Every model is FreeLB-ready (xdpx.tasks.freelb.Perturbable): ``bottom_predict`` embeds,
``upper_predict`` encodes the (possibly perturbed) embeddings. ``hf_config()`` gives the config.json of
the equivalent transformers model. Pretrained loading: xdpx/models/bert_pretrained.py.

The code is cut in four files: bert_layers.py (the encoder), bert_base.py (what every model shares),
this file (the classification heads) and bert_mlm.py (the MLM heads); the names stay importable from here.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from xdpx.models import models
from xdpx.models.bert_base import BertBase
from xdpx.models.bert_layers import (  # noqa: F401  (re-exported: xdpx.models.bert is the family's import path)
    ACTIVATIONS,
    BertAttention,
    BertEmbeddings,
    BertEncoder,
    BertIntermediate,
    BertLayer,
    BertModel,
    BertPooler,
    BertSelfAttention,
    BertSelfOutput,
    attention_bias,
    count_flops,
    init_weights,
    mean_pool,
    written_out_attention,
    written_out_is_faster,
)
from xdpx.models.bert_mlm import BertForMaskedLM, BertForPreTraining, BertLMPredictionHead, BertMLMBase  # noqa: F401
from xdpx.models.bert_options import HEAD_OPTIONS, SIAMESE_OPTIONS
from xdpx.models.modules.base import num_outputs
from xdpx.models.modules.dropout import Dropout


class BertClassifierBase(BertBase):
    """A classifier (or one regression output) over the pooled text vector."""

    options = [*BertBase.options, *HEAD_OPTIONS]
    hf_architecture = "BertForSequenceClassification"

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.num_outputs = num_outputs(args)
        p = args.classifier_dropout if args.classifier_dropout is not None else args.hidden_dropout_prob
        self.dropout = Dropout(p)
        self.classifier = nn.Linear(self.feature_size(args), self.num_outputs)

    def feature_size(self, args: Any) -> int:
        return args.hidden_size

    def pool(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        if self.args.pooling == "mean":
            return mean_pool(hidden, attention_mask)
        return self.bert.pooler(hidden)

    def reads_first_token_only(self) -> bool:
        """Whether the head reads the last layer at [CLS] only, so that the encoder's last layer can skip
        the other tokens (:meth:`BertEncoder.forward`)."""
        return self.args.pooling != "mean"

    def upper_predict(self, embeddings: torch.Tensor, attention_mask: torch.Tensor, **_: Any) -> torch.Tensor:
        hidden = self.bert.encode(embeddings, attention_mask, self.reads_first_token_only())
        logits = self.classifier(self.dropout(self.pool(hidden, attention_mask)))
        return logits.squeeze(-1) if self.num_outputs == 1 else logits

    def hf_config(self) -> dict[str, Any]:
        config = super().hf_config()
        labels = self.labels()
        config.update(num_labels=self.num_outputs, id2label={str(i): label for i, label in enumerate(labels)},
                      label2id={label: i for i, label in enumerate(labels)},
                      classifier_dropout=self.args.classifier_dropout)
        if self.num_outputs == 1 and self.args.get("target_type") == "regression":
            config["problem_type"] = "regression"
        return config

    def labels(self) -> list[str]:
        """Class names from data_dir/target_map.txt (LABEL_i when it is not there)."""
        from xdpx import io

        data_dir = self.args.get("data_dir")
        path = io.join(data_dir, "target_map.txt") if data_dir else None
        if self.num_outputs > 1 and path and io.exists(path):
            with io.open(path) as f:
                names = [line.rstrip("\n") for line in f if line.strip()]
            if len(names) == self.num_outputs:
                return names
        return [f"LABEL_{i}" for i in range(self.num_outputs)]


@models.register("bert_classification")
class BertForClassification(BertClassifierBase):
    """BERT over one text ([CLS] text [SEP], processor bert_single): class logits or one regression score."""


@models.register("bert_pair")
class BertForPair(BertClassifierBase):
    """Cross-encoder over [CLS] a [SEP] b [SEP] (processor bert_pair): matching classes, or STS regression."""


@models.register("bert_siamese")
class BertSiamese(BertClassifierBase):
    """Two towers with shared weights over the bert_pair processor's fields: the input is split by token
    type into [CLS] a [SEP] and [CLS] b [SEP], both encoded in one batch of 2B rows, pooled to u and v,
    and classified from [u, v, |u - v|, u * v] (Reimers & Gurevych, 2019). Keys: BertForSequenceClassification's
    with a classifier 4 x hidden_size wide."""

    options = [*BertBase.options, *SIAMESE_OPTIONS]
    hf_architecture = "BertSiamese"

    def feature_size(self, args: Any) -> int:
        return 4 * args.hidden_size

    def bottom_predict(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                       attention_mask: torch.Tensor | None = None, **rest: Any) -> dict[str, Any]:
        ids, mask = split_towers(input_ids, token_type_ids, attention_mask)
        return super().bottom_predict(ids, torch.zeros_like(ids), mask, **rest)

    def upper_predict(self, embeddings: torch.Tensor, attention_mask: torch.Tensor, **_: Any) -> torch.Tensor:
        hidden = self.bert.encode(embeddings, attention_mask, self.reads_first_token_only())
        u, v = self.pool(hidden, attention_mask).chunk(2)
        logits = self.classifier(self.dropout(torch.cat((u, v, (u - v).abs(), u * v), dim=-1)))
        return logits.squeeze(-1) if self.num_outputs == 1 else logits


def split_towers(input_ids: torch.Tensor, token_type_ids: torch.Tensor | None,
                 attention_mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """[CLS] a [SEP] b [SEP] rows -> ``[2B, T']`` ids ([CLS] a [SEP] rows, then [CLS] b [SEP] rows) and mask."""
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    if token_type_ids is None:
        raise ValueError("bert_siamese needs token_type_ids (the bert_pair processor) to find the two texts")
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


__all__ = ["BertModel", "attention_bias", "count_flops"]
