"""The options of the BERT models, and the architecture read from a pretrained model's config.

Architecture options carry Hugging Face's config.json names. When ``pretrained_model`` names a Hugging
Face directory (or a file beside a config.json / bert_config.json, or a checkpoint of an earlier x-train
run), its values are the defaults: the resolved numbers land in args.py, so x-eval and the exports
rebuild the same shapes without the pretrained files.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from xdpx import io
from xdpx.config.errors import ConfigError
from xdpx.config.options import Option, Rule
from xdpx.config.ranges import above, at_least, in_range
from xdpx.config.writers import read_args
from xdpx.models.checkpoints import CheckpointError
from xdpx.models.hf_hub import local_pretrained
from xdpx.models.st_folder import transformer_folder

HF_CONFIG_FILES = ("config.json", "bert_config.json")
ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu", "swish", "tanh")
# Option name -> default of a fresh model (bert-base sizes, as in transformers' BertConfig).
ARCHITECTURE_DEFAULTS: dict[str, Any] = {
    "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
    "hidden_act": "gelu", "max_position_embeddings": 512, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
    "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02,
}


def _strip_alias(path: str) -> str:
    for alias in ("<best>", "<last>"):
        if path.rstrip("/").endswith(alias):
            return path.rstrip("/")[: -len(alias)].rstrip("/") or "."
    return path


@lru_cache(maxsize=16)
def pretrained_config(path: str | None) -> dict[str, Any]:
    """The architecture of ``pretrained_model``: a config.json (HF), bert_config.json (Google TF), or the
    args.py of the x-train run a checkpoint belongs to. ``{}`` when there is none (a bare weights file)."""
    if not path:
        return {}

    try:  # a Hugging Face Hub name: the snapshot folder in the local cache
        path = local_pretrained(path)
    except CheckpointError as e:  # while the config is resolved: a config error, before any work

        raise ConfigError(f"key 'pretrained_model': {e}") from None
    path = transformer_folder(path)  # a sentence-transformers folder: its Transformer module's
    base = _strip_alias(path)
    folders = [base] if io.isdir(base) else [io.dirname(base)]
    for folder in folders:
        for name in HF_CONFIG_FILES:
            candidate = io.join(folder, name)
            if io.exists(candidate):
                with io.open(candidate) as f:
                    return dict(json.load(f))
        args_file = io.join(folder, "args.py")
        if io.exists(args_file):
            saved = read_args(args_file)
            return {k: saved[k] for k in (*ARCHITECTURE_DEFAULTS, "pruned_heads") if k in saved}
    return {}


def _from_pretrained(name: str) -> Any:
    """A computed default: the pretrained model's value, else the bert-base default."""

    def default(args: Any) -> Any:
        if name == "num_hidden_layers" and args.get("pretrained_layers"):  # a student of chosen layers
            return len(args.pretrained_layers)
        return pretrained_config(args.get("pretrained_model")).get(name, ARCHITECTURE_DEFAULTS[name])

    return default


def _arch(name: str, tp: Any, doc: str, **kw: Any) -> Option:
    return Option(name, tp, default=_from_pretrained(name),
                  default_doc=f"{ARCHITECTURE_DEFAULTS[name]!r} (or the pretrained model's config.json)",
                  doc=doc, **kw)


ARCHITECTURE_OPTIONS = [
    _arch("hidden_size", int, "width of the hidden states (Hugging Face config.json name)",
          validate=at_least(1)),
    _arch("num_hidden_layers", int, "number of transformer layers", validate=at_least(1)),
    _arch("num_attention_heads", int, "attention heads per layer; must divide hidden_size",
          validate=at_least(1)),
    _arch("intermediate_size", int, "width of the feed-forward layer", validate=at_least(1)),
    _arch("hidden_act", str, f"activation of the feed-forward layer: {', '.join(ACTIVATIONS)}",
          choices=ACTIVATIONS),
    _arch("max_position_embeddings", int, "longest input in tokens the position embeddings cover",
          validate=at_least(1)),
    _arch("type_vocab_size", int, "number of token types (segments A/B)", validate=at_least(1)),
    _arch("layer_norm_eps", float, "epsilon of the LayerNorms", validate=above(0)),
    _arch("hidden_dropout_prob", float, "dropout on embeddings and every sub-layer output",
          validate=in_range(0, 1, high_open=True)),
    _arch("attention_probs_dropout_prob", float, "dropout on the attention probabilities",
          validate=in_range(0, 1, high_open=True)),
    _arch("initializer_range", float, "standard deviation of the initial weights (random init)",
          validate=at_least(0)),
    Option("pruned_heads", dict[str, list[int]], validate=at_least(0),
           default=lambda a: dict(pretrained_config(a.get("pretrained_model")).get("pruned_heads") or {}),
           default_doc="{} (or the pretrained model's config.json / the run's args.py)",
           doc="attention heads removed from each layer, {\"layer\": [heads]} with the original head numbers "
               "(as Hugging Face's config.json); x-script prune_heads writes it"),
    Rule(lambda a: all(int(k) < a.num_hidden_layers and len(set(v)) < a.num_attention_heads
                       and all(h < a.num_attention_heads for h in v) for k, v in (a.get("pruned_heads") or {}).items()),
         "pruned_heads: a layer is a number below num_hidden_layers, a head below num_attention_heads, and every "
         "layer keeps at least one head", keys=("pruned_heads",)),
    Rule(lambda a: a.hidden_size % a.num_attention_heads == 0,
         "num_attention_heads must divide hidden_size", keys=("hidden_size", "num_attention_heads")),
    Rule(lambda a: a.max_len <= a.max_position_embeddings if a.get("max_len") else True,
         "max_len (from x-prepro) exceeds max_position_embeddings: prepare the data with a smaller max_len",
         keys=("max_len", "max_position_embeddings")),
]

PRETRAINED_OPTIONS = [
    Option("from_tf", bool, default=False,
           doc="pretrained_model is a TensorFlow BERT checkpoint (Google's names, e.g. bert_model.ckpt): "
               "read it with xdpx.models.tf_checkpoint (needs the tf extra: pip install xdpx[tf])"),
    Option("gradient_checkpointing", bool, default=False,
           doc="recompute each transformer layer's activations in backward instead of keeping them: less "
               "memory in training (docs/bert.md has figures), about one more forward pass of time; same "
               "loss and gradients"),
    # freeze_embeddings, freeze_layers, layer_lr_decay, head_lr_multiplier and lora: every encoder family
    # shares them (xdpx/models/layer_groups.py, xdpx/models/lora.py; BertBase.options)
    # The seed FAQ's rule: starting a BERT from random weights by accident wastes a run.
    Rule(lambda a: a.get("pretrained_model") is not None or "pretrained_model" in a._explicit,
         "BERT models start from pretrained weights: set pretrained_model to a Hugging Face BERT directory "
         "(config.json + model.safetensors or pytorch_model.bin), a checkpoint or ${save_dir}/<best> of an "
         "earlier run, or a TF checkpoint with from_tf: true; write pretrained_model: null to start from "
         "random weights", keys=("pretrained_model",)),
]

HEAD_OPTIONS = [
    Option("classifier_dropout", float, default=None,
           validate=in_range(0, 1, high_open=True),
           doc="dropout before the classifier (null: hidden_dropout_prob)"),
    Option("pooling", str, default="cls", choices=("cls", "mean"),
           doc="the text vector: cls (the pooler over [CLS], as BERT was pretrained) or mean (the mean of "
               "the last layer over real tokens)"),
]

SIAMESE_OPTIONS = [
    Option("pooling", str, default="mean", choices=("cls", "mean"),
           doc="each tower's text vector: mean over real tokens (sentence-transformers' choice) or cls"),
    Option("classifier_dropout", float, default=None,
           validate=in_range(0, 1, high_open=True),
           doc="dropout before the classifier (null: hidden_dropout_prob)"),
]
