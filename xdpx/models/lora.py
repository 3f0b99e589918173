"""LoRA (Hu et al., 2021) on any encoder model, through peft: ``lora: {r, alpha, dropout, target_modules}``.

Low-rank adapters go into the chosen Linear layers of the model's pretrained backbone
(``encoder_module()``, xdpx/models/layer_groups.py); the backbone's own weights are frozen, so only the
adapters and the task head (every parameter outside the backbone) train. peft's ``inject_adapter_in_model``
wraps the Linears in place, so the model keeps its class, forward and FreeLB split; a wrapped layer's
keys become ``...query.base_layer.weight`` plus ``...query.lora_A.default.weight`` / ``lora_B``.

Where it happens: x-train builds the model, loads ``pretrained_model`` (not on resume), then calls
:func:`add_lora` before the optimizer is built; on resume the same model is built and wrapped before the
saved state loads, so the run continues bit for bit. Checkpoints hold the whole wrapped state_dict (the
frozen base weights too): a run directory stays self-contained (invariant 1 of docs/architecture.md) and
loads strictly. x-eval / x-pred / x-serve wrap the model the same way before loading a checkpoint; the
exports and ``x-script merge_lora`` fold the adapters into the weights (:func:`merge_lora`), giving the
plain model of the base architecture.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from xdpx.config.options import Option
from xdpx.errors import UserError
from xdpx.models.layer_groups import freeze
from xdpx.utils.optional import require

DEFAULTS: dict[str, Any] = {"r": 8, "alpha": 16, "dropout": 0.1, "target_modules": None}
# Default target modules for the model types peft's own table lacks (transformers 5 module names):
# attention's query and value projections, as the LoRA paper and peft's table do for the others.
EXTRA_TARGETS: dict[str, list[str]] = {
    "albert": ["query", "value"],
    "distilbert": ["q_lin", "v_lin"],
    "modernbert": ["Wqkv"],  # one fused projection for query, key and value
}


def _valid(value: dict[str, Any]) -> bool:
    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    if set(value) - set(DEFAULTS):
        return False
    r, alpha, dropout = value.get("r", 8), value.get("alpha", 16), value.get("dropout", 0.1)
    targets = value.get("target_modules")
    return (isinstance(r, int) and not isinstance(r, bool) and r >= 1 and number(alpha) and alpha > 0
            and number(dropout) and 0 <= dropout < 1
            and (targets is None or (isinstance(targets, list) and targets
                                     and all(isinstance(t, str) and t for t in targets))))


LORA_OPTIONS = [
    Option("lora", dict[str, Any], default=None, validate=_valid,
           validate_msg="must be a dict of r (whole number >= 1, default 8), alpha (number > 0, default 16; "
                        "the update is scaled by alpha / r), dropout (0 <= dropout < 1, default 0.1) and "
                        "target_modules (a list of Linear layer names such as [query, value]; default: the "
                        "architecture's), and no other key",
           doc="train low-rank adapters (LoRA, through peft: pip install 'xdpx[lora]') instead of the whole "
               "encoder, e.g. {r: 8, alpha: 16, dropout: 0.1, target_modules: [query, value]} ({} takes these "
               "defaults; target_modules defaults to the architecture's attention query and value). Only the "
               "adapters and the task head train; use a higher learning_rate than for full fine-tuning "
               "(5e-4 to 1e-3). x-script merge_lora folds the adapters into a plain model. null: off"),
]


def settings(args: Any) -> dict[str, Any]:
    """The run's ``lora`` option with its defaults filled in."""
    return {**DEFAULTS, **dict(args.lora or {})}


def default_targets(model: Any) -> list[str]:
    """peft's target modules for the model's architecture (transformers' model_type), else ours."""
    # lazy: optional package peft (lora extra)
    from peft.utils import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as PEFT_TARGETS

    model_type = model.hf_model_type() if hasattr(model, "hf_model_type") else None
    targets = PEFT_TARGETS.get(model_type) or EXTRA_TARGETS.get(model_type)
    if not targets:
        raise UserError(f"lora: no default target_modules for model type {model_type!r}: name the Linear layers "
                        "to adapt (names of the encoder's nn.Linear modules), e.g. lora: {target_modules: [query, value]}")
    return list(targets)


def add_lora(model: nn.Module, args: Any, say: Any = print) -> nn.Module:
    """Wrap ``model``'s backbone with LoRA adapters (in place; returns ``model``): the backbone frozen, the
    adapters (but those of the ``freeze_layers`` bottom layers) and the head trainable. Says the count."""
    peft = require("peft", "lora")
    if not hasattr(model, "encoder_module"):
        raise UserError(f"lora: the model {type(model).__name__} is not a Transformer encoder; LoRA works on the "
                        "BERT models and the transformers family (docs/models.md)")
    chosen = settings(args)
    targets = chosen["target_modules"] or default_targets(model)
    config = peft.LoraConfig(r=chosen["r"], lora_alpha=chosen["alpha"], lora_dropout=float(chosen["dropout"]),
                             target_modules=targets, bias="none")
    backbone = model.encoder_module()
    try:
        peft.inject_adapter_in_model(config, backbone)
    except ValueError as e:  # peft: "Target modules {...} not found in the base model"
        raise UserError(f"lora: target_modules {targets}: {e}".split("\n")[0]) from None
    freeze(model, args)  # freeze_layers: the bottom layers' adapters too
    adapted = sum(1 for m in backbone.modules() if isinstance(m, _tuner_layer()))
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    say(f"lora: r={chosen['r']}, alpha={chosen['alpha']}, dropout={chosen['dropout']} on {adapted} layers "
        f"{targets}: {trainable:,} of {total:,} parameters trainable ({100 * trainable / total:.2f}%: the "
        "adapters and the task head)")
    return model.train(model.training)  # the new modules (the adapters' dropout) in the model's mode


def _tuner_layer() -> type:
    from peft.tuners.tuners_utils import BaseTunerLayer  # lazy: optional package peft (lora extra)

    return BaseTunerLayer


def has_lora(model: nn.Module) -> bool:
    """Whether ``model`` holds LoRA adapters (peft layers)."""
    try:
        tuner = _tuner_layer()
    except ImportError:  # no peft: nothing can be wrapped
        return False
    return any(isinstance(m, tuner) for m in model.modules())


def merge_lora(model: nn.Module) -> nn.Module:
    """Fold every adapter into its base weight (W + B A x alpha / r, peft's merge) and put the plain Linear
    back in its place: the result has the base architecture's keys and forward. In place; returns it."""
    tuner = _tuner_layer()
    for name, module in list(model.named_modules()):
        if isinstance(module, tuner):
            module.merge(safe_merge=True)  # safe_merge: a NaN/Inf in the merged weight is an error
            parent_name, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent_name), child, module.get_base_layer())
    for parameter in model.parameters():
        parameter.requires_grad_(True)  # a plain model, as any other run loads it
    # peft merges through .data, which bumps no tensor version: a mode switch drops what a module derived
    # from the old weights (our BERT's fused query/key/value projection, kept between inference calls)
    return model.train(model.training)


def without_lora(run_args: dict[str, Any]) -> dict[str, Any]:
    """The options of the merged model: the same run without adapters."""
    return {**run_args, "lora": None}
