"""``head: tagging``: token classification (NER): a tag score per token ``[B, T, num_tags]`` from every
token's state (dropout -> classifier), with an optional conditional random field (``crf``) whose
transition scores train with the model; the ner task reads each unit's row (its first subword).

With ``crf_constraints`` (the default) the CRF forbids the transitions the tag scheme forbids
(``O -> I-PER``, and in BIOES ``B-PER -> O``), in training and in Viterbi decoding, so a decoded sequence
is always valid. The layers are ``classifier.`` and ``crf.`` (BertForTokenClassification's name for the
first), at the model's top level.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xdpx.config.options import Option
from xdpx.data.tags import allowed_transitions
from xdpx.models.heads import heads
from xdpx.models.heads.classification import CLASSIFIER_DROPOUT, head_dropout
from xdpx.models.modules.crf import CRF
from xdpx.models.parts import Encoder, Head, Text, labels_of

CRF_OPTION = Option("crf", bool, default=False,
                    doc="score whole tag sequences with a conditional random field (learned tag transitions; "
                        "Viterbi decoding) instead of each unit on its own; without it, decoding reads invalid "
                        "BIO/BIOES sequences as conlleval does (an I-X after O begins an entity)")


@heads.register("tagging")
class TaggingHead(Head):
    """Per-token tag scores, and a CRF over them with ``crf: true``."""

    options = [
        CLASSIFIER_DROPOUT,
        CRF_OPTION,
        Option("crf_constraints", bool, default=True,
               doc="with crf: forbid the transitions the tag scheme forbids (O -> I-X; I-X after another "
                   "type; in BIOES also an entity left open), so decoding never yields an invalid sequence"),
    ]
    needs = "tokens"
    hf_task = "ForTokenClassification"

    def __init__(self, args: Any, encoder: Encoder) -> None:
        super().__init__(args, encoder)
        self.num_tags = int(args.num_classes)
        self.drop = self.add("dropout", head_dropout(args, encoder))
        self.classifier = self.add("classifier", nn.Linear(encoder.width, self.num_tags))
        self.crf = self.add("crf", CRF(self.num_tags)) if args.crf else None
        if self.crf is not None and args.get("crf_constraints"):
            labels = labels_of(args, self.num_tags)
            if not labels[0].startswith("LABEL_"):  # the tags' names are known (target_map.txt)
                self.crf.constrain(*allowed_transitions(labels))

    def read(self, states: torch.Tensor, text: Text, net_input: dict[str, Any]) -> torch.Tensor:
        return self.classifier(self.drop(states))

    def hf_config(self, config: dict[str, Any]) -> dict[str, Any]:
        labels = labels_of(self.args, self.num_tags)
        config.update(num_labels=self.num_tags, id2label={str(i): label for i, label in enumerate(labels)},
                      label2id={label: i for i, label in enumerate(labels)},
                      classifier_dropout=self.args.get("classifier_dropout"))
        return config
