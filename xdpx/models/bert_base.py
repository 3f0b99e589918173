"""What every BERT model shares (:class:`BertBase`): building from args, pretrained loading, the FreeLB
split (embeddings, then everything above them), lr scales and the transformers config.json."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xdpx.models.bert_layers import BertModel, init_weights
from xdpx.models.bert_options import ARCHITECTURE_OPTIONS, PRETRAINED_OPTIONS
from xdpx.models.layer_groups import LAYER_OPTIONS, freeze, lr_scales
from xdpx.models.lora import LORA_OPTIONS
from xdpx.tasks.freelb import Perturbable


class BertBase(Perturbable, nn.Module):
    """What every BERT model shares: build from args, pretrained loading, FreeLB split, hf_config."""

    options: list[Any] = [*ARCHITECTURE_OPTIONS, *PRETRAINED_OPTIONS, *LAYER_OPTIONS, *LORA_OPTIONS]
    hf_architecture = "BertModel"
    add_pooler = True

    def __init__(self, args: Any) -> None:
        super().__init__()
        self.args = args
        self.bert = BertModel(args, add_pooler=self.add_pooler)

    @classmethod
    def build(cls, args: Any) -> BertBase:
        """A randomly initialised model (the trainer seeds first, then loads pretrained_model)."""
        model = cls(args)
        init_weights(model, args.initializer_range)
        model.tie_weights()
        freeze(model, args)  # freeze_embeddings, freeze_layers
        return model

    def tie_weights(self) -> None:
        """Models with an MLM decoder share it with the word embeddings."""

    def load_pretrained(self, path: str, log: Any = print) -> None:
        """Load ``path`` (HF directory/file, x-train checkpoint or alias, TF checkpoint with from_tf)."""
        from xdpx.models.bert_pretrained import load_into

        load_into(self, path, from_tf=bool(self.args.get("from_tf")), log=log)
        self.tie_weights()

    # ---- FreeLB split: embeddings, then everything above them --------------------------------------
    def bottom_predict(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                       attention_mask: torch.Tensor | None = None, **rest: Any) -> dict[str, Any]:
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        return {"embeddings": self.bert.embeddings(input_ids, token_type_ids), "attention_mask": attention_mask,
                **rest}

    def upper_predict(self, embeddings: torch.Tensor, attention_mask: torch.Tensor, **rest: Any) -> Any:
        raise NotImplementedError

    # ---- learning-rate scales and export config -----------------------------------------------------
    # ---- layer groups (xdpx/models/layer_groups.py: freeze_layers, layer_lr_decay; lora) -------------
    def embedding_module(self) -> nn.Module:
        return self.bert.embeddings

    def encoder_layers(self) -> nn.ModuleList:
        return self.bert.encoder.layer

    def encoder_module(self) -> nn.Module:
        """The pretrained backbone (embeddings, layers, pooler); the rest is the task head."""
        return self.bert

    def hf_model_type(self) -> str:
        return "bert"

    def lr_scales(self) -> dict[str, float]:
        """Per-parameter lr multipliers (layer_lr_decay, head_lr_multiplier) for the optimizer's groups."""
        return lr_scales(self, self.args)

    def hf_config(self) -> dict[str, Any]:
        """config.json of the equivalent transformers model (architectures, sizes, labels)."""
        a = self.args
        config = {"architectures": [self.hf_architecture], "model_type": "bert", "vocab_size": a.vocab_size,
                  "pad_token_id": a.pad_index, "position_embedding_type": "absolute",
                  **{k: a.get(k) for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                           "intermediate_size", "hidden_act", "max_position_embeddings",
                                           "type_vocab_size", "layer_norm_eps", "hidden_dropout_prob",
                                           "attention_probs_dropout_prob", "initializer_range")}}
        if a.get("pruned_heads"):  # xdpx (and transformers 4) rebuild the smaller layers from it; transformers 5 cannot
            config["pruned_heads"] = {str(k): list(v) for k, v in a.pruned_heads.items()}
        return config
