"""Layer groups of a Transformer encoder: freezing the bottom (``freeze_embeddings``, ``freeze_layers``) and
layer-wise learning rates (``layer_lr_decay``, ``head_lr_multiplier``), shared by every encoder family
(the transformer encoders: our BERT, xdpx/models/encoders/bert.py, and any transformers model, encoders/hf.py).

An encoder model offers three methods, and everything else follows from which module a parameter is in:

- ``embedding_module() -> nn.Module``: the input embeddings (word, position, token type, their norm);
- ``encoder_layers() -> Sequence[nn.Module]``: the transformer layers, bottom first;
- ``encoder_module() -> nn.Module``: the whole pretrained backbone (embeddings, layers, a final norm, a
  pooler); a parameter outside it belongs to the task head (classifier, MLM transform).

Parameters are assigned by module identity, not by name, so the scales stay right after LoRA (peft)
replaces a Linear by its wrapper and the names gain ``base_layer`` / ``lora_A`` parts.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from torch import nn

from xdpx.config.options import Option
from xdpx.config.ranges import above, at_least, in_range
from xdpx.errors import UserError


class LayeredEncoder(Protocol):
    """What :func:`lr_scales`, :func:`freeze` and LoRA (xdpx/models/lora.py) need of an encoder model."""

    def embedding_module(self) -> nn.Module: ...

    def encoder_layers(self) -> Sequence[nn.Module]: ...

    def encoder_module(self) -> nn.Module: ...


LAYER_OPTIONS = [
    Option("freeze_embeddings", bool, default=False,
           doc="keep the embedding layer (word, position, token type, its LayerNorm) frozen"),
    Option("freeze_layers", int, default=0, validate=at_least(0),
           doc="freeze the embeddings and the bottom N transformer layers (their weights never change; "
               "with lora, their adapters too); 0: train every layer"),
    Option("layer_lr_decay", float, default=1.0, validate=in_range(0, 1, low_open=True),
           doc="layer-wise learning-rate decay: layer i of L gets lr x decay^(L - i), the embeddings "
               "lr x decay^(L + 1); the heads keep the full lr. 1: no decay"),
    Option("head_lr_multiplier", float, default=1.0, validate=above(0),
           doc="the task head (classifier / MLM transform) learns at lr x this (e.g. 10 for a new head "
               "on a pretrained encoder)"),
]


def _parameter_ids(module: nn.Module) -> set[int]:
    return {id(p) for p in module.parameters()}


def lr_scales(model: Any, args: Any) -> dict[str, float]:
    """``{parameter name: lr multiplier}``: the embeddings decay^(L + 1), layer i decay^(L - i), the rest
    of the encoder (pooler, final norm) 1, the head ``head_lr_multiplier``. A parameter shared by the head
    and the encoder (an MLM decoder tied to the word embeddings) takes the encoder's scale."""
    decay = float(args.get("layer_lr_decay", 1.0))
    layers = list(model.encoder_layers())
    count = len(layers)
    scale_of: dict[int, float] = {id(p): 1.0 for p in model.encoder_module().parameters()}
    for p in model.embedding_module().parameters():
        scale_of[id(p)] = decay ** (count + 1)
    for i, layer in enumerate(layers):
        for p in layer.parameters():
            scale_of[id(p)] = decay ** (count - i)
    head = float(args.get("head_lr_multiplier", 1.0))
    # remove_duplicate=False: every name of a tied tensor gets its scale (parameter_groups looks names up)
    return {name: scale_of.get(id(p), head) for name, p in model.named_parameters(remove_duplicate=False)}


def frozen_modules(model: Any, args: Any) -> Iterator[nn.Module]:
    """The modules ``freeze_embeddings`` / ``freeze_layers`` keep frozen."""
    layers = list(model.encoder_layers())
    count = int(args.get("freeze_layers") or 0)
    if count > len(layers):
        raise UserError(f"freeze_layers: {count} is more than the {len(layers)} transformer layers of the model: "
                        f"set at most {len(layers)}")
    if count or args.get("freeze_embeddings"):
        yield model.embedding_module()
    yield from layers[:count]


def freeze(model: Any, args: Any) -> None:
    """Stop the gradients of the embeddings (``freeze_embeddings``, or ``freeze_layers`` > 0) and of the
    bottom ``freeze_layers`` layers; the optimizer leaves out parameters that need no gradient."""
    for module in frozen_modules(model, args):
        module.requires_grad_(False)


def head_parameters(model: Any) -> list[tuple[str, nn.Parameter]]:
    """(name, parameter) of the task head: the parameters outside ``encoder_module()``."""
    encoder = _parameter_ids(model.encoder_module())
    return [(name, p) for name, p in model.named_parameters() if id(p) not in encoder]
