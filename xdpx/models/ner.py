"""Token-classification (NER) models: per-token tag scores ``[B, T, num_classes]``, with an optional CRF.

- ``lstm_ner``: a BiLSTM over the ``ner`` processor's unit ids (characters for Chinese), the fast
  non-transformer baseline (Lample et al., 2016, without the character sub-network).
- ``bert_ner``: our BERT encoder (xdpx.models.bert_base.BertBase) with a linear tag layer on every token:
  the keys of transformers' BertForTokenClassification, so pretrained BERT checkpoints load as for the
  classifiers; the ``bert_ner`` processor marks which subword carries each unit's tag.

With ``crf: true`` the model holds a CRF (xdpx.models.modules.crf) whose transition scores train with it;
the loss token_cross_entropy then uses the sentence log-likelihood and decoding is Viterbi. The CRF is a
part of the model, so checkpoints, resume and exports carry it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xdpx.config.options import Option
from xdpx.config.ranges import at_least, in_range
from xdpx.models import models
from xdpx.models.bert_base import BertBase
from xdpx.models.lstm import bilstm_layers, bilstm_states
from xdpx.models.modules.base import EMBEDDING_OPTIONS, Model
from xdpx.models.modules.crf import CRF
from xdpx.models.modules.dropout import Dropout

CRF_OPTION = Option("crf", bool, default=False,
                    doc="score whole tag sequences with a conditional random field (learned tag transitions; "
                        "Viterbi decoding) instead of each unit on its own; without it, decoding reads invalid "
                        "BIO/BIOES sequences as conlleval does (an I-X after O begins an entity)")


@models.register("lstm_ner")
class BiLSTMTagger(Model):
    """Embeddings -> BiLSTM -> a tag score per token (``net_input['tokens']`` ``[B, T]``)."""

    options = [
        *EMBEDDING_OPTIONS,
        Option("hidden_size", int, default=200, validate=at_least(1), doc="LSTM units per direction"),
        Option("num_layers", int, default=1, validate=at_least(1), doc="stacked LSTM layers"),
        CRF_OPTION,
    ]

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.pad_index = args.pad_index
        self.embedding, self.dropout, self.lstm = bilstm_layers(args)
        self.classifier = nn.Linear(2 * args.hidden_size, args.num_classes)
        self.crf = CRF(args.num_classes) if args.crf else None

    def forward(self, tokens: torch.Tensor, **_: Any) -> torch.Tensor:
        states = bilstm_states(self.lstm, self.dropout(self.embedding(tokens)), tokens.ne(self.pad_index))
        return self.classifier(self.dropout(states))


@models.register("bert_ner")
class BertForTokenClassification(BertBase):
    """BERT with a tag layer over every token's last hidden state (BertForTokenClassification's keys)."""

    options = [
        *BertBase.options,
        Option("classifier_dropout", float, default=None, validate=in_range(0, 1, high_open=True),
               doc="dropout before the tag layer (null: hidden_dropout_prob)"),
        CRF_OPTION,
    ]
    hf_architecture = "BertForTokenClassification"
    add_pooler = False

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        p = args.classifier_dropout if args.classifier_dropout is not None else args.hidden_dropout_prob
        self.dropout = Dropout(p)
        self.classifier = nn.Linear(args.hidden_size, args.num_classes)
        self.crf = CRF(args.num_classes) if args.crf else None

    def upper_predict(self, embeddings: torch.Tensor, attention_mask: torch.Tensor, **_: Any) -> torch.Tensor:
        return self.classifier(self.dropout(self.bert.encode(embeddings, attention_mask)))

    def hf_config(self) -> dict[str, Any]:
        config = super().hf_config()
        config.update(num_labels=self.args.num_classes, classifier_dropout=self.args.classifier_dropout)
        return config
