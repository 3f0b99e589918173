"""The transformers-backed encoder family: any encoder whose architecture transformers' Auto classes know
(RoBERTa, XLM-R, DeBERTa-v2/v3, ELECTRA, ALBERT, DistilBERT, ModernBERT, BERT, ...) with XDPX's heads.

    word embeddings (FreeLB perturbs them here)  -> transformers AutoModel (inputs_embeds)
    -> pooling (cls: first token / mean: real tokens / pooler: the model's own)  -> dropout -> Linear

Registered models (the hf_single / hf_pair processors' fields: input_ids, token_type_ids, attention_mask):

- ``hf_classification``: one text; logits ``[B, num_classes]`` (``[B]`` for regression).
- ``hf_pair``: a pair in one sequence (the tokenizer's own pair template, e.g. ``<s> a </s></s> b </s>``).

The architecture is the ``hf_config`` option: the pretrained folder's config.json, stored in args.py, so
x-eval, x-pred, x-serve and the exports rebuild the model without the pretrained files (as our BERT does).
Parameter names: ``encoder.`` + transformers' AutoModel names, ``classifier.`` for the head. Our own BERT
(xdpx/models/bert.py) stays the default for BERT checkpoints: it is faster and bitwise-tested; this family
takes them too, so a user can compare the two on one config (docs/models.md).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from xdpx.config.options import Option, Rule
from xdpx.config.ranges import in_range
from xdpx.errors import UserError
from xdpx.models import models
from xdpx.models.bert_layers import mean_pool
from xdpx.models.hf_hub import hf_config_of, local_pretrained
from xdpx.models.layer_groups import LAYER_OPTIONS, freeze, lr_scales
from xdpx.models.lora import LORA_OPTIONS
from xdpx.models.modules.base import num_outputs
from xdpx.models.modules.dropout import Dropout
from xdpx.tasks.freelb import Perturbable
from xdpx.utils.optional import require

# model types whose pretraining trained the pooler (next-sentence or sentence-order prediction): their
# pooling default is the pooler, as transformers' *ForSequenceClassification of these types use it
TRAINED_POOLER = ("bert", "albert")
# model types whose AutoModel has a pooler at all (RoBERTa's and XLM-R's exist but were not trained)
HAS_POOLER = ("bert", "albert", "roberta", "xlm-roberta", "camembert", "ernie", "mpnet")
# RoBERTa-style position ids start after the padding index: max_position_embeddings counts that offset
POSITION_OFFSET = ("roberta", "xlm-roberta", "camembert", "xlm-roberta-xl", "data2vec-text")


def _hf_config_default(args: Any) -> dict[str, Any] | None:
    return hf_config_of(args.get("pretrained_model"))


def _model_type(args: Any) -> str:
    return str((args.get("hf_config") or {}).get("model_type", ""))


def longest_input(config: dict[str, Any]) -> int | None:
    """The most tokens the position embeddings cover (None: relative or rotary positions, no table)."""
    longest = config.get("max_position_embeddings")
    if longest is None:
        return None
    if config.get("model_type") in POSITION_OFFSET:
        longest -= int(config.get("pad_token_id") or 1) + 1
    return int(longest)


def default_dropout(config: dict[str, Any]) -> float:
    for key in ("classifier_dropout", "classifier_dropout_prob", "hidden_dropout_prob", "seq_classif_dropout",
                "dropout"):
        if isinstance(config.get(key), (int, float)):
            return float(config[key])
    return 0.1


HF_OPTIONS = [
    Option("hf_config", dict[str, Any], default=_hf_config_default,
           default_doc="the config.json of pretrained_model (or of the run its checkpoint belongs to)",
           doc="the transformers architecture (a config.json as a dict; model_type names it). Taken from "
               "pretrained_model and stored in args.py, so evaluating, serving and exporting the run need "
               "no pretrained files; give it with pretrained_model: null to train from random weights"),
    Option("pooling", str, choices=("cls", "mean", "pooler"),
           default=lambda a: "pooler" if _model_type(a) in TRAINED_POOLER else "cls",
           default_doc="pooler for BERT and ALBERT checkpoints (their pooler was pretrained), else cls",
           doc="the text vector: cls (the first token's last hidden state: [CLS] / <s>), mean (the mean of "
               "the last layer over real tokens) or pooler (the model's own pooler over the first token; "
               "BERT, ALBERT, RoBERTa, XLM-R have one)"),
    Option("classifier_dropout", float, default=None, validate=in_range(0, 1, high_open=True),
           doc="dropout before the classifier (null: the config's classifier or hidden dropout)"),
    Option("attn_implementation", str, default="auto", choices=("auto", "sdpa", "eager"),
           doc="transformers' attention kernel: auto (transformers' choice: sdpa where the architecture has "
               "it, e.g. not DeBERTa), sdpa (torch's scaled_dot_product_attention) or eager (written out)"),
    Option("gradient_checkpointing", bool, default=False,
           doc="recompute each transformer layer's activations in backward (transformers' own gradient "
               "checkpointing): less memory in training, about one more forward pass of time"),
    *LAYER_OPTIONS,
    *LORA_OPTIONS,
    Rule(lambda a: a.get("pretrained_model") is not None or "pretrained_model" in a._explicit,
         "transformers encoders start from pretrained weights: set pretrained_model to a model folder "
         "(config.json + weights + tokenizer files), a Hub name held in the local Hugging Face cache, or a "
         "checkpoint of an earlier run; write pretrained_model: null (with hf_config) for random weights",
         keys=("pretrained_model",)),
    Rule(lambda a: bool(a.hf_config) and "model_type" in a.hf_config,
         "hf_config: no architecture: pretrained_model must be a transformers model folder (config.json with "
         "model_type), or give hf_config (a config.json as a dict) with pretrained_model: null",
         keys=("hf_config", "pretrained_model")),
    Rule(lambda a: a.pooling != "pooler" or _model_type(a) in HAS_POOLER,
         f"pooling: pooler: this architecture has no pooler (those with one: {', '.join(HAS_POOLER)}); "
         "use cls or mean", keys=("pooling",)),
    Rule(lambda a: not a.get("max_len") or longest_input(a.hf_config) is None
         or a.max_len <= longest_input(a.hf_config),
         "max_len (from x-prepro) exceeds what the model's position embeddings cover (hf_config "
         "max_position_embeddings): prepare the data with a smaller max_len", keys=("max_len",)),
    Rule(lambda a: not a.get("vocab_size") or a.vocab_size <= int(a.hf_config.get("vocab_size") or a.vocab_size),
         "the data's vocabulary (vocab_size in meta.hjson) is larger than the model's (hf_config vocab_size): "
         "prepare the data with this model's tokenizer (tokenizer: auto, tokenizer_dir: the model folder)",
         keys=("vocab_size",)),
]


def build_config(hf_config: dict[str, Any], attn_implementation: str) -> Any:
    """The transformers config object of ``hf_config``."""
    transformers = require("transformers", "the transformers encoder models (hf_classification, hf_pair)")
    values = dict(hf_config)
    try:
        config = transformers.AutoConfig.for_model(values.pop("model_type"), **values)
    except ValueError as e:  # an unknown model_type: transformers lists the known ones
        raise UserError(f"hf_config: {str(e).splitlines()[0]}") from None
    if attn_implementation != "auto":
        config._attn_implementation = attn_implementation
    return config


class HFEncoderBase(Perturbable, nn.Module):
    """A transformers AutoModel (``self.encoder``) with XDPX's pooling and classifier on top."""

    options: list[Any] = HF_OPTIONS

    def __init__(self, args: Any) -> None:
        super().__init__()
        transformers = require("transformers", f"model {args.model!r}")
        self.args = args
        config = build_config(args.hf_config, args.attn_implementation)
        attention = None if args.attn_implementation == "auto" else args.attn_implementation
        self.encoder = transformers.AutoModel.from_config(config, attn_implementation=attention, dtype=torch.float32)
        self.pooling = args.pooling
        if self.pooling != "pooler" and getattr(self.encoder, "pooler", None) is not None:
            self.encoder.pooler = None  # unused: no parameters that never get a gradient (DDP would fail)
        elif self.pooling == "pooler" and getattr(self.encoder, "pooler", None) is None:
            raise UserError(f"pooling: pooler: {config.model_type} has no pooler; use cls or mean")
        accepted = inspect.signature(self.encoder.forward).parameters
        self.takes_token_types = "token_type_ids" in accepted and int(getattr(config, "type_vocab_size", 0) or 0) > 1
        if args.gradient_checkpointing:
            if not self.encoder.supports_gradient_checkpointing:
                raise UserError(f"gradient_checkpointing: transformers has none for {config.model_type}")
            self.encoder.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.num_outputs = num_outputs(args)
        p = args.classifier_dropout if args.classifier_dropout is not None else default_dropout(args.hf_config)
        self.dropout = Dropout(p)
        self.classifier = nn.Linear(config.hidden_size, self.num_outputs)

    @classmethod
    def build(cls, args: Any) -> HFEncoderBase:
        """Random weights from the seed (the trainer seeds first, then loads pretrained_model)."""
        model = cls(args)
        std = float(getattr(model.encoder.config, "initializer_range", 0.02))
        nn.init.normal_(model.classifier.weight, std=std)
        nn.init.zeros_(model.classifier.bias)
        freeze(model, args)
        return model

    # ---- pretrained weights ------------------------------------------------------------------------
    def load_pretrained(self, path: str, log: Any = print) -> None:
        """A transformers folder (or Hub name in the cache) through ``from_pretrained``, whose key
        conversions cover every architecture; else a checkpoint of an earlier run (our key names)."""
        from xdpx import io

        local = local_pretrained(path)
        if io.isdir(local) and io.exists(io.join(local, "config.json")) and not io.is_remote(local):
            transformers = require("transformers", f"model {self.args.model!r}")
            loaded = transformers.AutoModel.from_pretrained(local, config=self.encoder.config, local_files_only=True,
                                                            dtype=torch.float32)
            result = self.encoder.load_state_dict(loaded.state_dict(), strict=False)
            missing = list(result.missing_keys)
            if missing:
                raise UserError(f"pretrained_model {path}: the model folder lacks {missing[:5]}: is hf_config "
                                "the folder's config.json?")
            log(f"loaded pretrained_model {path} ({type(loaded).__name__}): {len(loaded.state_dict())} tensors"
                + (f"; not used: {list(result.unexpected_keys)}" if result.unexpected_keys else ""))
            return
        from xdpx.models.bert_pretrained import read_weights

        weights = read_weights(local)
        result = self.load_state_dict(weights, strict=False)
        if not set(weights) & set(self.state_dict()):
            raise UserError(f"pretrained_model {path}: no parameter name matches this model (first names in the "
                            f"file: {list(weights)[:3]})")
        log(f"loaded pretrained_model {path}: {len(weights) - len(result.unexpected_keys)} tensors"
            + (f"; missing keys (left at their initial values): {result.missing_keys}" if result.missing_keys else ""))

    # ---- layers, for layer_lr_decay / freeze_layers / LoRA (xdpx/models/layer_groups.py) ------------
    def embedding_module(self) -> nn.Module:
        embeddings = getattr(self.encoder, "embeddings", None)
        return embeddings if embeddings is not None else self.encoder.get_input_embeddings()

    def encoder_layers(self) -> Sequence[nn.Module]:
        """The transformer layers, bottom first. ALBERT shares one layer across its depth: its layer
        groups (usually one) are the layers here."""
        groups = getattr(getattr(self.encoder, "encoder", None), "albert_layer_groups", None)
        if groups is not None:
            return list(groups)
        count = int(self.encoder.config.num_hidden_layers)
        for module in self.encoder.modules():
            if isinstance(module, nn.ModuleList) and len(module) == count:
                return list(module)
        raise UserError(f"{self.encoder.config.model_type}: no list of {count} transformer layers found")

    def encoder_module(self) -> nn.Module:
        return self.encoder

    def hf_model_type(self) -> str:
        return str(self.encoder.config.model_type)

    def lr_scales(self) -> dict[str, float]:
        return lr_scales(self, self.args)

    # ---- forward: FreeLB split (xdpx.tasks.freelb.Perturbable) --------------------------------------
    def bottom_predict(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                       attention_mask: torch.Tensor | None = None, **rest: Any) -> dict[str, Any]:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        return {"embeddings": self.encoder.get_input_embeddings()(input_ids), "attention_mask": attention_mask,
                "token_type_ids": token_type_ids}

    def upper_predict(self, embeddings: torch.Tensor, attention_mask: torch.Tensor,
                      token_type_ids: torch.Tensor | None = None, **_: Any) -> torch.Tensor:
        inputs: dict[str, Any] = {"inputs_embeds": embeddings, "attention_mask": attention_mask}
        if self.takes_token_types and token_type_ids is not None:
            inputs["token_type_ids"] = token_type_ids
        out = self.encoder(**inputs, return_dict=True)
        if self.pooling == "pooler":
            pooled = out.pooler_output
        elif self.pooling == "mean":
            pooled = mean_pool(out.last_hidden_state, attention_mask)
        else:
            pooled = out.last_hidden_state[:, 0]
        logits = self.classifier(self.dropout(pooled))
        return logits.squeeze(-1) if self.num_outputs == 1 else logits


@models.register("hf_classification")
class HFClassification(HFEncoderBase):
    """A transformers encoder over one text (processor hf_single): class logits or one regression score."""


@models.register("hf_pair")
class HFPair(HFEncoderBase):
    """A transformers cross-encoder over a pair in one sequence (processor hf_pair): matching classes, or
    STS regression."""
