"""A shallower transformer built from a deeper one: ``pretrained_layers`` picks which of ``pretrained_model``'s
layers become the model's layers (a student initialised from its teacher, DistilBERT / TinyBERT style).

    model: bert_classification
    pretrained_model: outputs/distill/runs/teacher_minilm/<best>   # a run of the same encoder, or a model folder
    pretrained_layers: [2, 4, 6]                                   # teacher layers (1-based), bottom first

The model gets ``len(pretrained_layers)`` layers (our BERT's ``num_hidden_layers``, the ``num_hidden_layers``
of a transformers encoder's ``hf_config``); everything else (embeddings, pooler, the head's classifier when
``pretrained_model`` is a run of the same head) is copied by name, and student layer i is a bitwise copy of
layer ``pretrained_layers[i]``. The source is read by the encoder family's own loader: a full-depth model of the
same family is built, loaded as ``pretrained_model`` always is, and its chosen layers are renamed into the
student. So it works for our BERT and for every transformers encoder (``encoder: hf``) alike, from a run's
checkpoint, a Hugging Face folder or a Hub name in the local cache.

The checks run with the config (``x-train --dry`` included), before any work: a layer number outside the
source's layers, a repeated layer, and a run of another encoder family as the source are one line, exit 2.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from xdpx import io
from xdpx.config.options import Option, Rule
from xdpx.config.ranges import at_least
from xdpx.config.writers import read_args
from xdpx.errors import UserError
from xdpx.models.bert_options import pretrained_config
from xdpx.models.hf_hub import hf_config_of
from xdpx.models.parts import options_view
from xdpx.models.st_folder import transformer_folder


def _run_args(path: str | None) -> dict[str, Any] | None:
    """args.py of the x-train run ``path`` (a run, ``<run>/<best>``, a checkpoint in it) belongs to; else None."""
    if not path:
        return None
    base = path.rstrip("/")
    for alias in ("<best>", "<last>"):
        if base.endswith(alias):
            base = base[: -len(alias)].rstrip("/") or "."
    folder = base if io.isdir(base) else io.dirname(base)
    args_file = io.join(folder, "args.py")
    return dict(read_args(args_file)) if io.exists(args_file) else None


def encoder_family(args: Any) -> str | None:
    """The encoder family (bert, hf, cnn, lstm) a config or a run's args use; None for a whole model."""
    from xdpx.models.choice import composition  # lazy: choice imports the encoders, which import this module

    pair = composition(args)  # a dict (args.py) or the options: both have .get
    return pair[0] if pair else None


def source_depth(args: Any) -> int | None:
    """How many transformer layers ``pretrained_model`` has (None when its config does not say)."""
    path = args.get("pretrained_model")
    if encoder_family(args) == "hf":
        config = hf_config_of(transformer_folder(path)) or {}
    else:
        config = pretrained_config(path)
    depth = config.get("num_hidden_layers")
    return int(depth) if depth is not None else None


def with_depth(hf_config: dict[str, Any] | None, layers: list[int] | None) -> dict[str, Any] | None:
    """A transformers config with ``len(layers)`` layers (unchanged without ``pretrained_layers``)."""
    if not hf_config or not layers:
        return hf_config
    return {**hf_config, "num_hidden_layers": len(layers)}


def _depth_problem(a: Any) -> str | None:
    layers = a.get("pretrained_layers")
    if not layers:
        return None
    if a.get("pretrained_model") is None:
        return "pretrained_layers picks layers of pretrained_model: set pretrained_model (a run or a model folder)"
    if len(set(layers)) != len(layers):
        return f"pretrained_layers {list(layers)}: a layer is named twice; name each layer to copy once"
    run = _run_args(a.pretrained_model)
    if run is not None:
        theirs, ours = encoder_family(run), encoder_family(a)
        if theirs != ours:
            return (f"pretrained_layers: pretrained_model {a.pretrained_model} is a run of encoder {theirs} "
                    f"(model {run.get('model') or theirs}), this model's encoder is {ours}: a student takes its "
                    f"layers from a run (or a model folder) of its own encoder family")
    depth = source_depth(a)
    if depth is None:
        return (f"pretrained_layers: pretrained_model {a.pretrained_model} does not say how many layers it has "
                "(no num_hidden_layers in its config.json or args.py)")
    wrong = [n for n in layers if not 1 <= n <= depth]
    if wrong:
        return (f"pretrained_layers {list(layers)}: layer {wrong[0]} is out of range: pretrained_model "
                f"{a.pretrained_model} has {depth} layers, numbered 1..{depth}")
    return None


def _student_depth(a: Any) -> int | None:
    if encoder_family(a) == "hf":
        return int((a.get("hf_config") or {}).get("num_hidden_layers") or 0) or None
    return a.get("num_hidden_layers")


STUDENT_OPTIONS = [
    Option("pretrained_layers", list[int], default=None, validate=at_least(1, min_items=1),
           doc="build a shallower model from pretrained_model: the layers (1-based, bottom first) of "
               "pretrained_model that become this model's layers, e.g. [2, 4, 6] (every other one of 6) or "
               "[1, 2, 3] (the first three); the embeddings and the rest are copied by name. The model gets "
               "that many layers; null: all of pretrained_model's layers, as they are"),
    Rule(lambda a: _depth_problem(a) is None, lambda a: str(_depth_problem(a)),
         keys=("pretrained_layers", "pretrained_model")),
    Rule(lambda a: not a.get("pretrained_layers") or _student_depth(a) == len(a.pretrained_layers),
         lambda a: (f"pretrained_layers names {len(a.pretrained_layers)} layers but the model has "
                    f"{_student_depth(a)}: leave num_hidden_layers out (it follows pretrained_layers)"),
         keys=("pretrained_layers", "num_hidden_layers")),
]


def layer_names(model: nn.Module) -> list[str]:
    """The module name (state_dict prefix) of each of ``model``'s transformer layers, bottom first."""
    names = {id(module): name for name, module in model.named_modules()}
    return [names[id(layer)] for layer in model.encoder_layers()]


def select_layers(source: dict[str, Any], source_layers: list[str], target_layers: list[str],
                  picked: list[int]) -> dict[str, Any]:
    """``source``'s tensors with layer ``picked[i]`` (1-based) renamed to target layer i; the other layers left
    out, every other tensor kept under its name."""
    renamed: dict[str, Any] = {}
    for key, value in source.items():
        layer = next((i for i, name in enumerate(source_layers) if key.startswith(name + ".")), None)
        if layer is None:
            renamed[key] = value
        elif layer + 1 in picked:
            target = target_layers[picked.index(layer + 1)]
            renamed[target + key[len(source_layers[layer]):]] = value
    return renamed


def load_selected_layers(model: nn.Module, path: str, log: Any = print) -> None:
    """Initialise ``model`` (an encoder-and-head model with ``pretrained_layers``) from ``path``'s layers."""
    encoder, head = model.text_encoder, model.task_head
    picked = [int(n) for n in encoder.args.pretrained_layers]
    depth = source_depth(encoder.args)
    if depth is None or not all(1 <= n <= depth for n in picked):  # the config check says it first
        raise UserError(str(_depth_problem(encoder.args)))
    overrides: dict[str, Any] = {"pretrained_layers": None}
    if encoder_family(encoder.args) == "hf":
        overrides["hf_config"] = {**encoder.args.hf_config, "num_hidden_layers": depth}
    else:
        overrides["num_hidden_layers"] = depth
    view = options_view(encoder.args, overrides)
    source_encoder = type(encoder)(view)
    source = type(model)(source_encoder, type(head)(view, source_encoder), getattr(model, "legacy_keys", None))
    source.load_pretrained(path, log=lambda _message: None)  # the family's own loader, as without pretrained_layers
    weights = select_layers(source.state_dict(), layer_names(source), layer_names(model), picked)
    own = model.state_dict()
    mismatched = [f"{k} {tuple(v.shape)} vs ours {tuple(own[k].shape)}" for k, v in weights.items()
                  if k in own and tuple(own[k].shape) != tuple(v.shape)]
    if mismatched:
        raise UserError(f"pretrained_layers: pretrained_model {path}: shapes differ: {'; '.join(mismatched[:3])}. "
                        "A student built from a model keeps its width: leave hidden_size, num_attention_heads and "
                        "intermediate_size out")
    result = model.load_state_dict(weights, strict=False)
    log(f"loaded pretrained_model {path}: layers {picked} of its {depth} as this model's {len(picked)}, "
        f"{len(weights) - len(result.unexpected_keys)} tensors"
        + (f"; left at their initial values: {list(result.missing_keys)}" if result.missing_keys else ""))
