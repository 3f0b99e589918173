"""``encoder: hf``: any transformers AutoModel: encoders (BERT, RoBERTa, XLM-R, DeBERTa-v2/v3, ELECTRA,
ALBERT, DistilBERT, ModernBERT, ...) and decoder-only models (Qwen2, Llama, Gemma, Phi, Mistral, ...).

    word embeddings (FreeLB perturbs them here) -> AutoModel(inputs_embeds) -> per-token states

The architecture is the ``hf_config`` option: the pretrained folder's config.json, stored in args.py, so
x-eval, x-pred, x-serve and the exports rebuild the model without the pretrained files. The AutoModel's
parameters sit under ``encoder.`` with transformers' own names. A decoder-only model sees each token's
left context only, so its sentence vector is the last real token's state (pooling ``last``, the default
for them); its position ids are counted over the real tokens, so left padding gives what right padding
gives. Our own BERT (``encoder: bert``) stays the faster choice for BERT checkpoints.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import nn

from xdpx import io
from xdpx.config.options import Option, Rule
from xdpx.errors import UserError
from xdpx.models.encoders import encoders
from xdpx.models.hf_hub import hf_config_of, local_pretrained
from xdpx.models.layer_groups import LAYER_OPTIONS
from xdpx.models.lora import LORA_OPTIONS
from xdpx.models.modules.dropout import Dropout
from xdpx.models.parts import Encoder, Text, pooling_option
from xdpx.models.st_folder import transformer_folder
from xdpx.models.students import STUDENT_OPTIONS, with_depth
from xdpx.utils.optional import require
from xdpx.utils.step_progress import without_library_bars

# model types whose pretraining trained the pooler (next-sentence or sentence-order prediction)
TRAINED_POOLER = ("bert", "albert")
# model types whose AutoModel has a pooler at all (RoBERTa's and XLM-R's exist but were not trained)
HAS_POOLER = ("bert", "albert", "roberta", "xlm-roberta", "camembert", "ernie", "mpnet")
# RoBERTa-style position ids start after the padding index: max_position_embeddings counts that offset
POSITION_OFFSET = ("roberta", "xlm-roberta", "camembert", "xlm-roberta-xl", "data2vec-text")
# causal language models: each token sees only its left context
DECODER_ONLY = ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "llama", "mistral", "mixtral", "gemma", "gemma2",
                "gemma3_text", "phi", "phi3", "gpt2", "gpt_neox", "gptj", "opt", "falcon", "olmo", "olmo2",
                "stablelm", "starcoder2", "smollm3", "granite", "cohere", "bloom")
POOLINGS = ("cls", "mean", "max", "last", "pooler")


def model_type(args: Any) -> str:
    return str((args.get("hf_config") or {}).get("model_type", ""))


def is_decoder_only(args: Any) -> bool:
    return model_type(args) in DECODER_ONLY


def longest_input(config: dict[str, Any]) -> int | None:
    """The most tokens the position embeddings cover (None: relative or rotary positions, no table)."""
    longest = config.get("max_position_embeddings")
    if longest is None or config.get("model_type") in DECODER_ONLY:
        return None if longest is None else int(longest)
    if config.get("model_type") in POSITION_OFFSET:
        longest -= int(config.get("pad_token_id") or 1) + 1
    return int(longest)


def default_dropout(config: dict[str, Any]) -> float:
    """The dropout a new head on this architecture gets: the config's classifier or hidden dropout."""
    for key in ("classifier_dropout", "classifier_dropout_prob", "hidden_dropout_prob", "seq_classif_dropout",
                "dropout"):
        if isinstance(config.get(key), (int, float)):
            return float(config[key])
    return 0.1


def default_pooling(args: Any) -> str:
    if is_decoder_only(args):
        return "last"
    return "pooler" if model_type(args) in TRAINED_POOLER else "cls"


HF_OPTIONS = [
    Option("hf_config", dict[str, Any],
           default=lambda a: with_depth(hf_config_of(transformer_folder(a.get("pretrained_model"))),
                                        a.get("pretrained_layers")),
           default_doc="the config.json of pretrained_model (of its Transformer module's folder for a "
                       "sentence-transformers folder; of the run its checkpoint belongs to)",
           doc="the transformers architecture (a config.json as a dict; model_type names it). Taken from "
               "pretrained_model and stored in args.py, so evaluating, serving and exporting the run need "
               "no pretrained files; give it with pretrained_model: null to train from random weights"),
    Option("attn_implementation", str, default="auto", choices=("auto", "sdpa", "eager"),
           doc="transformers' attention kernel: auto (transformers' choice: sdpa where the architecture has "
               "it, e.g. not DeBERTa), sdpa (torch's scaled_dot_product_attention) or eager (written out)"),
    Option("gradient_checkpointing", bool, default=False,
           doc="recompute each transformer layer's activations in backward (transformers' own gradient "
               "checkpointing): less memory in training, about one more forward pass of time"),
    *STUDENT_OPTIONS,
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
    Rule(lambda a: a.pooling != "pooler" or model_type(a) in HAS_POOLER,
         f"pooling: pooler: this architecture has no pooler (those with one: {', '.join(HAS_POOLER)}); "
         "use cls, mean, max or last", keys=("pooling",)),
    Rule(lambda a: a.pooling != "cls" or not is_decoder_only(a),
         "pooling: cls on a decoder-only model reads the first token, which saw nothing of the text after it: "
         "use last (the default for these models) or mean", keys=("pooling",)),
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
    transformers = require("transformers", "the transformers encoder (encoder: hf)")
    values = dict(hf_config)
    try:
        config = transformers.AutoConfig.for_model(values.pop("model_type"), **values)
    except ValueError as e:  # an unknown model_type: transformers lists the known ones
        raise UserError(f"hf_config: {str(e).splitlines()[0]}") from None
    if attn_implementation != "auto":
        config._attn_implementation = attn_implementation
    return config


@encoders.register("hf")
class HFEncoder(Encoder):
    """A transformers AutoModel (``encoder.`` + its own names)."""

    options = [*HF_OPTIONS, pooling_option(POOLINGS, default_pooling)]
    poolings = POOLINGS
    layered = True

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        transformers = require("transformers", "the transformers encoder (encoder: hf)")
        config = build_config(args.hf_config, args.attn_implementation)
        attention = None if args.attn_implementation == "auto" else args.attn_implementation
        self.model = self.add("encoder", transformers.AutoModel.from_config(config, attn_implementation=attention,
                                                                            dtype=torch.float32))
        if args.pooling != "pooler" and getattr(self.model, "pooler", None) is not None:
            self.model.pooler = None  # unused: no parameters that never get a gradient (DDP would fail)
        elif args.pooling == "pooler" and getattr(self.model, "pooler", None) is None:
            raise UserError(f"pooling: pooler: {config.model_type} has no pooler; use cls or mean")
        accepted = inspect.signature(self.model.forward).parameters
        self.takes_token_types = "token_type_ids" in accepted and int(getattr(config, "type_vocab_size", 0) or 0) > 1
        self.decoder_only = is_decoder_only(args)
        self.takes_positions = self.decoder_only and "position_ids" in accepted
        if args.gradient_checkpointing:
            if not self.model.supports_gradient_checkpointing:
                raise UserError(f"gradient_checkpointing: transformers has none for {config.model_type}")
            self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.width = int(config.hidden_size)
        self.pad_index = int(args.pad_index)
        self._pooled: torch.Tensor | None = None

    def embed(self, text: Text) -> torch.Tensor:
        return self.model.get_input_embeddings()(text.ids)

    def contextualize(self, embeddings: torch.Tensor, text: Text, first_token_only: bool = False) -> torch.Tensor:
        inputs: dict[str, Any] = {"inputs_embeds": embeddings, "attention_mask": text.mask}
        if self.takes_token_types and text.types is not None:
            inputs["token_type_ids"] = text.types
        if self.takes_positions:  # positions over the real tokens: left padding reads as right padding
            inputs["position_ids"] = (text.mask.long().cumsum(1) - 1).clamp(min=0)
        out = self.model(**inputs, return_dict=True)
        self._pooled = getattr(out, "pooler_output", None)
        return out.last_hidden_state

    def pool(self, states: torch.Tensor, text: Text) -> torch.Tensor:
        if self.args.pooling == "pooler":
            return self._pooled
        return super().pool(states, text)

    def default_dropout(self) -> float:
        return default_dropout(self.args.hf_config)

    def dropout(self, p: float) -> nn.Module:
        return Dropout(p)

    # ---- building -----------------------------------------------------------------------------------
    def initialize(self, model: nn.Module) -> None:
        """The AutoModel initialised itself; the head's Linear layers get the architecture's N(0, std)."""
        std = float(getattr(self.model.config, "initializer_range", 0.02))
        backbone = {id(p) for p in self.model.parameters()}
        for module in model.modules():
            if isinstance(module, nn.Linear) and id(module.weight) not in backbone:
                nn.init.normal_(module.weight, std=std)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)

    def load_pretrained(self, model: nn.Module, path: str, log: Any = print) -> bool:
        """A transformers folder (or Hub name in the cache) through ``from_pretrained``, whose key
        conversions cover every architecture; else (False) a checkpoint of an earlier run, by our names."""
        local = transformer_folder(local_pretrained(path))
        if not (io.isdir(local) and io.exists(io.join(local, "config.json")) and not io.is_remote(local)):
            return False
        transformers = require("transformers", "the transformers encoder (encoder: hf)")
        with without_library_bars():
            loaded = transformers.AutoModel.from_pretrained(local, config=self.model.config, local_files_only=True,
                                                            dtype=torch.float32)
        result = self.model.load_state_dict(loaded.state_dict(), strict=False)
        missing = list(result.missing_keys)
        if missing:
            raise UserError(f"pretrained_model {path}: the model folder lacks {missing[:5]}: is hf_config "
                            "the folder's config.json?")
        log(f"loaded pretrained_model {path} ({type(loaded).__name__}"
            + (f" of the sentence-transformers folder's {local}" if local != local_pretrained(path) else "")
            + f"): {len(loaded.state_dict())} tensors"
            + (f"; not used: {list(result.unexpected_keys)}" if result.unexpected_keys else ""))
        return True

    # ---- layers ---------------------------------------------------------------------------------------
    def embedding_module(self) -> nn.Module:
        embeddings = getattr(self.model, "embeddings", None)
        return embeddings if embeddings is not None else self.model.get_input_embeddings()

    def encoder_layers(self) -> list[nn.Module]:
        """The transformer layers, bottom first. ALBERT shares one layer across its depth: its layer
        groups (usually one) are the layers here."""
        groups = getattr(getattr(self.model, "encoder", None), "albert_layer_groups", None)
        if groups is not None:
            return list(groups)
        count = int(self.model.config.num_hidden_layers)
        for module in self.model.modules():
            if isinstance(module, nn.ModuleList) and len(module) == count:
                return list(module)
        raise UserError(f"{self.model.config.model_type}: no list of {count} transformer layers found")

    def encoder_module(self) -> nn.Module:
        return self.model

    def hf_model_type(self) -> str:
        return str(self.model.config.model_type)

    def hf_config(self) -> dict[str, Any]:
        return dict(self.args.hf_config)
