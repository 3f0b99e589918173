"""``encoder: bert``: our own BERT (xdpx/models/bert_layers.py): SDPA attention with one fused projection,
the last layer limited to [CLS] when the head reads nothing else, our CPU dropout, gradient checkpointing,
pruned heads; bitwise-tested against transformers' BertModel. Its modules sit under ``bert.`` (BertFor*'s
base-model prefix), so Hugging Face BERT checkpoints (and TF ones with from_tf) load key for key.

Input: the BERT processors' input_ids / token_type_ids / attention_mask, or a bi-encoder's ``[CLS] text
[SEP]`` fields. The pooler exists when pooling is ``pooler`` or the head needs it (sentence order).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xdpx.models.bert_layers import BertModel, init_weights
from xdpx.models.bert_options import ARCHITECTURE_OPTIONS, PRETRAINED_OPTIONS
from xdpx.models.encoders import encoders
from xdpx.models.layer_groups import LAYER_OPTIONS
from xdpx.models.lora import LORA_OPTIONS
from xdpx.models.modules.dropout import Dropout
from xdpx.models.parts import Encoder, Text, pooling_option
from xdpx.models.st_folder import transformer_folder
from xdpx.models.students import STUDENT_OPTIONS

POOLINGS = ("pooler", "cls", "mean", "max", "last")


@encoders.register("bert")
class BertEncoder(Encoder):
    """Our BERT: embeddings -> N transformer layers -> (pooler)."""

    options = [*ARCHITECTURE_OPTIONS, *PRETRAINED_OPTIONS, *STUDENT_OPTIONS, *LAYER_OPTIONS, *LORA_OPTIONS,
               pooling_option(POOLINGS, "pooler")]
    poolings = POOLINGS
    layered = True
    has_mlm_head = True
    hf_class_prefix = "Bert"

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        # add_pooler: set by a head that reads the pooler itself (pretrain) and by the aliases of earlier
        # releases, whose checkpoints hold a pooler whatever the pooling
        add_pooler = args.pooling == "pooler" or bool(args.get("add_pooler"))
        self.bert = self.add("bert", BertModel(args, add_pooler=add_pooler))
        self.width = int(args.hidden_size)
        self.pad_index = int(args.pad_index)

    def embed(self, text: Text) -> torch.Tensor:
        types = text.types if text.types is not None else torch.zeros_like(text.ids)
        return self.bert.embeddings(text.ids, types)

    def contextualize(self, embeddings: torch.Tensor, text: Text, first_token_only: bool = False) -> torch.Tensor:
        return self.bert.encode(embeddings, text.mask, first_token_only)

    def pool(self, states: torch.Tensor, text: Text) -> torch.Tensor:
        if self.args.pooling == "pooler":
            return self.bert.pooler(states)
        return super().pool(states, text)

    def default_dropout(self) -> float:
        return float(self.args.hidden_dropout_prob)

    def dropout(self, p: float) -> nn.Module:
        return Dropout(p)

    # ---- building -----------------------------------------------------------------------------------
    def initialize(self, model: nn.Module) -> None:
        init_weights(model, self.args.initializer_range)  # the head's layers too, as BERT's own init

    def load_pretrained(self, model: nn.Module, path: str, log: Any = print) -> bool:
        # lazy: bert_pretrained (safetensors, the TF reader: ~40 ms) only to load weights; x-train --dry loads none
        from xdpx.models.bert_pretrained import load_into

        load_into(model, transformer_folder(path), from_tf=bool(self.args.get("from_tf")), log=log)
        return True

    # ---- layers ---------------------------------------------------------------------------------------
    def embedding_module(self) -> nn.Module:
        return self.bert.embeddings

    def encoder_layers(self) -> list[nn.Module]:
        return list(self.bert.encoder.layer)

    def encoder_module(self) -> nn.Module:
        return self.bert

    def hf_model_type(self) -> str:
        return "bert"

    def hf_config(self) -> dict[str, Any]:
        a = self.args
        config = {"architectures": ["BertModel"], "model_type": "bert", "vocab_size": a.vocab_size,
                  "pad_token_id": a.pad_index, "position_embedding_type": "absolute",
                  **{k: a.get(k) for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                           "intermediate_size", "hidden_act", "max_position_embeddings",
                                           "type_vocab_size", "layer_norm_eps", "hidden_dropout_prob",
                                           "attention_probs_dropout_prob", "initializer_range")}}
        if a.get("pruned_heads"):  # xdpx (and transformers 4) rebuild the smaller layers from it; transformers 5 cannot
            config["pruned_heads"] = {str(k): list(v) for k, v in a.pruned_heads.items()}
        return config
