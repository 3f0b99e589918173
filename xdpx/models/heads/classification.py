"""``head: classification``: a text's vector -> class logits ``[B, num_classes]``, or one score ``[B]`` for
regression (``target_type: regression``) and multi-label rows ``[B, C]`` (``target_type: multilabel``,
loss multilabel_bce). One text, or a pair in one sequence (a cross-encoder: processors bert_pair / hf_pair).

    sentence vector (the encoder's pooling) -> [dropout -> dense -> GeLU] -> dropout -> classifier

Its layers are ``classifier.`` (and ``dense.`` with head_hidden_size), at the model's top level as in
transformers' *ForSequenceClassification.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from xdpx.config.options import Option
from xdpx.config.ranges import at_least, in_range
from xdpx.models.heads import heads
from xdpx.models.modules.base import num_outputs
from xdpx.models.parts import Encoder, Head, Text, labels_of

CLASSIFIER_DROPOUT = Option("classifier_dropout", float, default=None, validate=in_range(0, 1, high_open=True),
                            doc="dropout before the classifier (null: the encoder's own: hidden_dropout_prob for "
                                "BERT, the config's classifier or hidden dropout for transformers models, "
                                "dropout for the CNN and LSTM)")


def head_dropout(args: Any, encoder: Encoder) -> nn.Module:
    p = args.get("classifier_dropout")
    return encoder.dropout(encoder.default_dropout() if p is None else float(p))


@heads.register("classification")
class ClassificationHead(Head):
    """Class logits (or one regression score) over the encoder's sentence vector."""

    options = [
        CLASSIFIER_DROPOUT,
        Option("head_hidden_size", int, default=0, validate=at_least(0),
               doc="a hidden layer (dense + GeLU) of this width before the classifier; 0: the classifier alone"),
    ]
    hf_task = "ForSequenceClassification"

    def __init__(self, args: Any, encoder: Encoder) -> None:
        super().__init__(args, encoder)
        self.num_outputs = num_outputs(args)
        self.drop = self.add("dropout", head_dropout(args, encoder))
        width = encoder.width
        self.dense = None
        if args.get("head_hidden_size"):
            self.dense = self.add("dense", nn.Linear(width, int(args.head_hidden_size)))
            width = int(args.head_hidden_size)
        self.classifier = self.add("classifier", nn.Linear(width, self.num_outputs))

    def read(self, states: torch.Tensor, text: Text, net_input: dict[str, Any]) -> torch.Tensor:
        return self.classify(self.encoder.pool(states, text))

    def classify(self, features: torch.Tensor) -> torch.Tensor:
        if self.dense is not None:
            features = F.gelu(self.dense(self.drop(features)))
        logits = self.classifier(self.drop(features))
        return logits.squeeze(-1) if self.num_outputs == 1 else logits

    def hf_config(self, config: dict[str, Any]) -> dict[str, Any]:
        labels = labels_of(self.args, self.num_outputs) if self.num_outputs > 1 else ["LABEL_0"]
        config.update(num_labels=self.num_outputs, id2label={str(i): label for i, label in enumerate(labels)},
                      label2id={label: i for i, label in enumerate(labels)},
                      classifier_dropout=self.args.get("classifier_dropout"))
        if self.num_outputs == 1 and self.args.get("target_type") == "regression":
            config["problem_type"] = "regression"
        elif self.args.get("target_type") == "multilabel":
            config["problem_type"] = "multi_label_classification"
        return config
