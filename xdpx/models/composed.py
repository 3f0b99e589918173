"""A model = an encoder + a head (xdpx/models/parts.py), built from the config by :func:`build_model`.

The parts' named modules become the model's own (its state_dict keys: ``bert.`` / ``encoder.`` and the
head's ``classifier.``, ``crf.``, ``cls.``...). ``forward(**net_input)`` is the head's forward; FreeLB's
``perturb`` reaches the encoder's embeddings (xdpx.models.parts.Perturbable). A transformer encoder adds
what freezing, layer-wise lr, LoRA, FSDP and intermediate-layer distillation ask of a model
(:class:`TransformerModel`, the protocol of xdpx/models/layer_groups.py).

An alias of an earlier release (xdpx/models/aliases.py) may list ``legacy_keys``: the prefixes its old
checkpoints used (``out.`` for cls_cnn's classifier); :meth:`EncoderHeadModel.upgrade_state_dict` renames
them, and every load of weights goes through it, so those run directories keep loading.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from xdpx.config.options import MISSING, Option
from xdpx.models import models
from xdpx.models.checkpoints import load_weights_into, renamed_prefixes, resolve_checkpoint
from xdpx.models.encoders import encoders
from xdpx.models.heads import heads
from xdpx.models.layer_groups import freeze, lr_scales
from xdpx.models.parts import Encoder, Head, Perturbable, options_view
from xdpx.models.students import load_selected_layers


class EncoderHeadModel(Perturbable, nn.Module):
    """An encoder and a head as one module; the parts' modules registered under their own names."""

    def __init__(self, encoder: Encoder, head: Head, legacy_keys: dict[str, str] | None = None) -> None:
        super().__init__()
        self.text_encoder, self.task_head = encoder, head
        self.legacy_keys = dict(legacy_keys or {})
        for name, module in [*encoder.modules.items(), *head.modules.items()]:
            if name in self._modules:
                raise ValueError(f"{type(head).__name__} and {type(encoder).__name__} both name a module {name!r}")
            self.add_module(name, module)
        self._register_load_state_dict_pre_hook(self._upgrade_hook)

    def rebind_parts(self) -> None:
        """Point the parts at the modules the model now holds under their names: a conversion that swaps a
        child module (torch.ao's quantize_dynamic turns the head's ``classifier`` Linear into an int8 one)
        changes the model's registry, not the part's attributes, which the forward reads."""
        for part in (self.text_encoder, self.task_head):
            for name, old in list(part.modules.items()):
                new = self._modules.get(name)
                if new is None or new is old:
                    continue
                part.modules[name] = new
                for attribute, value in list(vars(part).items()):
                    if value is old:
                        setattr(part, attribute, new)

    def forward(self, *args: Any, perturb: Any = None, **net_input: Any) -> Any:
        if args:  # positional inputs (TorchScript / ONNX wrappers): the processor's field order
            raise TypeError("pass the inputs by name (the processor's net_input fields)")
        return self.task_head.forward(net_input, perturb, self.reads_first_token_only())

    def reads_first_token_only(self) -> bool:
        """Whether the head reads the last layer at the first token only, so that the encoder's last layer
        can skip the other tokens (our BERT: :meth:`xdpx.models.bert_layers.BertEncoder.forward`)."""
        return self.task_head.reads_first_token_only()

    def load_pretrained(self, path: str, log: Any = print) -> None:
        """``pretrained_model``: the encoder family's own loader, else any checkpoint by key (not strict)."""
        if self.text_encoder.args.get("pretrained_layers"):  # a shallower student of chosen layers
            load_selected_layers(self, path, log)
        elif not self.text_encoder.load_pretrained(self, path, log):
            load_weights_into(self, resolve_checkpoint(path), strict=False, say=log,
                              hint=" Check pretrained_model and the model options")
        self.tie_weights()

    def tie_weights(self) -> None:
        tie = getattr(self.task_head, "tie_to", None)
        if tie is not None:
            tie(self.text_encoder.embedding_module().word_embeddings)

    def hf_config(self) -> dict[str, Any]:
        """config.json of the equivalent transformers model (architectures, sizes, labels)."""
        config = self.text_encoder.hf_config()
        prefix, task = self.text_encoder.hf_class_prefix, self.task_head.hf_task
        if prefix and task:  # our BERT: BertForSequenceClassification, BertForTokenClassification, ...
            config["architectures"] = [f"{prefix}{task}"]
        update = getattr(self.task_head, "hf_config", None)
        return update(config) if update is not None else config

    # ---- earlier releases' checkpoints --------------------------------------------------------------
    def upgrade_state_dict(self, weights: dict[str, Any]) -> dict[str, Any]:
        """``weights`` with the key prefixes of an earlier release renamed to this model's."""
        if not self.legacy_keys:
            return weights
        return renamed_prefixes(weights, self.legacy_keys, keep=set(self.state_dict()))

    def _upgrade_hook(self, state_dict: dict[str, Any], prefix: str, *_: Any) -> None:
        if prefix or not self.legacy_keys:
            return
        upgraded = self.upgrade_state_dict(dict(state_dict))
        state_dict.clear()
        state_dict.update(upgraded)


class TransformerModel(EncoderHeadModel):
    """A model on a transformer encoder: its layers for freeze_layers, layer_lr_decay, LoRA and FSDP."""

    def embedding_module(self) -> nn.Module:
        return self.text_encoder.embedding_module()

    def encoder_layers(self) -> list[nn.Module]:
        return self.text_encoder.encoder_layers()

    def encoder_module(self) -> nn.Module:
        return self.text_encoder.encoder_module()

    def hf_model_type(self) -> str | None:
        return self.text_encoder.hf_model_type()

    def lr_scales(self) -> dict[str, float]:
        """Per-parameter lr multipliers (layer_lr_decay, head_lr_multiplier) for the optimizer's groups."""
        return lr_scales(self, self.text_encoder.args)


def part_defaults(parts: list[type], args: Any, fixed: dict[str, Any]) -> dict[str, Any]:
    """Values of the parts' options that ``args`` lacks (an alias declares its own, older options)."""
    values: dict[str, Any] = {}
    pending: list[Option] = []
    for part in parts:
        for option in getattr(part, "options", []):
            if not isinstance(option, Option) or option.name in args or option.name in fixed or option.name in values:
                continue
            if callable(option.default):
                pending.append(option)
            elif option.default is not MISSING:
                values[option.name] = option.default
    view = options_view(args, {**values, **fixed})
    for option in pending:  # computed defaults see the plain ones
        values[option.name] = option.default(view)
    return values


def build_model(args: Any) -> nn.Module:
    """A fresh model of the config (the trainer seeds the RNGs first, and loads pretrained_model after)."""
    if args.get("model") is not None:  # an alias or a whole model builds itself
        return models.get(args.model).build(args)
    return compose(args, args.encoder, args.head)


def compose(args: Any, encoder_name: str, head_name: str, fixed: dict[str, Any] | None = None,
            legacy_keys: dict[str, str] | None = None, model_class: type | None = None) -> EncoderHeadModel:
    """The model of ``encoder_name`` + ``head_name`` with the options ``args`` and ``fixed`` give (fixed wins;
    the parts' other options take their defaults). ``model_class``: a subclass of the model to build."""
    fixed = {"encoder": encoder_name, "head": head_name, **(fixed or {})}
    encoder_class, head_class = encoders.get(encoder_name), heads.get(head_name)
    if head_class.needs_pooler:
        fixed["add_pooler"] = True
    view = options_view(args, {**part_defaults([encoder_class, head_class], args, fixed), **fixed})
    encoder = encoder_class(view)
    head = head_class(view, encoder)
    kind = model_class or (TransformerModel if encoder.layered else EncoderHeadModel)
    model = kind(encoder, head, legacy_keys)
    encoder.initialize(model)
    model.tie_weights()
    if encoder.layered:
        freeze(model, view)  # freeze_embeddings, freeze_layers
    return model
