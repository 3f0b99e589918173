"""The base class of the non-transformer models and the options they all share.

A model reads the data facts written by x-prepro into meta.hjson (``vocab_size``, ``pad_index``,
``num_classes``, ``target_type``) from ``args``; it declares only the options it owns.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from xdpx.config.options import Option
from xdpx.config.ranges import at_least, in_range

# target_type values (meta.hjson) that mean a real-valued target: the model outputs one score.
REGRESSION_TARGET_TYPES = ("regression", "float", "score")


def is_regression(args: Any) -> bool:
    """True when the task predicts a real value: target_type says so, or there are no classes."""
    return args.get("target_type") in REGRESSION_TARGET_TYPES or not args.get("num_classes")


def num_outputs(args: Any) -> int:
    """Width of the output layer: the number of classes, or 1 for regression (squeezed to ``[B]``)."""
    return 1 if is_regression(args) else int(args.num_classes)


# Options every embedding-based model declares (each model lists them, so `model: X` activates them).
EMBEDDING_OPTIONS = [
    Option("embedding_dim", int, default=300, validate=at_least(1),
           doc="width of the word embeddings (must equal the width of embedding_file when one is given)"),
    Option("embedding_file", str, default=None, path="input",
           doc="pretrained word vectors, row i for token id i: ${data_dir}/embeddings.npy (written by "
               "x-prepro when its pretrained_embeddings is set), or a text file of 'word v1 v2 ...' lines in "
               "the order of vocab.txt. null: random initialization"),
    Option("fix_embeddings", bool, default=False,
           doc="keep the embeddings frozen during training (useful with embedding_file and little data)"),
    Option("dropout", float, default=0.2, validate=in_range(0, 1, high_open=True),
           doc="dropout probability applied throughout the network"),
]


class Model(nn.Module):
    """Base of the models in this package: ``build(args)`` constructs one from resolved options.

    ``forward`` takes the collated ``net_input`` tensors by name and returns logits ``[B, num_classes]``,
    or ``[B]`` when the model has a single output (regression, or num_classes == 1).
    """

    options: list[Any] = []

    def __init__(self, args: Any) -> None:
        super().__init__()
        self.num_outputs = num_outputs(args)

    @classmethod
    def build(cls, args: Any) -> Model:
        """Construct the model; the trainer seeds the RNG first, so initialization is reproducible."""
        return cls(args)

    def output(self, logits: Any) -> Any:
        """``[B, 1]`` -> ``[B]`` for a single output; class logits unchanged."""
        return logits.squeeze(-1) if self.num_outputs == 1 else logits
