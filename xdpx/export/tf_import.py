"""A TF BERT checkpoint (Google names) converted to a Hugging Face / PyTorch directory that
``pretrained_model`` accepts: config.json from the TF bert_config.json, model.safetensors, vocab.txt.

The check runs the TF checkpoint as it is (Google names and layouts) in TensorFlow and the converted
directory in transformers on the same batches, and compares the outputs.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from xdpx import io
from xdpx.errors import UserError
from xdpx.export.parity import ParityReport, check_parity
from xdpx.export.tf_savedmodel import build_tf_bert
from xdpx.models.tf_checkpoint import TIED_KEYS, local_checkpoint, read_tf_bert_checkpoint, require_tensorflow
from xdpx.utils.optional import require

REQUIRED_CONFIG = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")


def read_tf_config(path: str) -> dict[str, Any]:

    try:
        with io.open(path) as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        raise UserError(f"tf_config {path}: cannot read it as JSON ({e}); give the bert_config.json of the "
                        "checkpoint") from e
    missing = [k for k in REQUIRED_CONFIG if k not in config]
    if missing:
        raise UserError(f"tf_config {path}: missing {missing}: is it a BERT bert_config.json?")
    return config


def architecture_of(weights: dict[str, Any], num_classes: int | None, path: str) -> tuple[str, dict[str, Any]]:
    """The transformers class the weights make, and the config keys it adds (labels)."""

    if "classifier.weight" in weights:
        found = int(weights["classifier.weight"].shape[0])
        if num_classes is not None and num_classes != found:
            raise UserError(f"num_classes: {num_classes}, but the classifier of {path} (output_weights) has "
                            f"{found} classes: set num_classes: {found} (or leave it out)")
        return "BertForSequenceClassification", {"num_labels": found}
    if "cls.predictions.bias" in weights:
        return ("BertForPreTraining" if "cls.seq_relationship.weight" in weights else "BertForMaskedLM"), {}
    return "BertModel", {}


def convert(tf_ckpt_path: str, tf_config: str, out_dir: str, num_classes: int | None) -> tuple[str, dict[str, Any]]:
    """Write out_dir; return the architecture and the HF config."""
    from safetensors.numpy import save as save_safetensors  # lazy: loads safetensors

    config = read_tf_config(tf_config)
    weights = read_tf_bert_checkpoint(tf_ckpt_path)
    if "bert.embeddings.word_embeddings.weight" not in weights:
        raise UserError(f"tf_ckpt_path {tf_ckpt_path}: no bert/embeddings/word_embeddings: is it a BERT checkpoint?")
    architecture, extra = architecture_of(weights, num_classes, tf_ckpt_path)
    if architecture == "BertModel":
        # A bare encoder (what pretrained_model usually is): HF's BertModel keys have no 'bert.' prefix.
        weights = {k[len("bert."):]: v for k, v in weights.items() if k.startswith("bert.")}
    hf_config = {"architectures": [architecture], "model_type": "bert", **config, **extra}
    io.makedirs(out_dir)
    state = {k: np.ascontiguousarray(v) for k, v in weights.items() if k not in TIED_KEYS}
    with io.open(io.join(out_dir, "model.safetensors"), "wb") as f:
        f.write(save_safetensors(state, metadata={"format": "pt"}))
    with io.open(io.join(out_dir, "config.json"), "w") as f:
        json.dump(hf_config, f, indent=2)
    for folder in dict.fromkeys([io.dirname(tf_config), tf_ckpt_path if io.isdir(tf_ckpt_path)
                                 else io.dirname(tf_ckpt_path)]):
        if io.exists(io.join(folder, "vocab.txt")):
            io.copy(io.join(folder, "vocab.txt"), io.join(out_dir, "vocab.txt"))
            break
    return architecture, hf_config


def probe_batches(config: dict[str, Any], seed: int = 0) -> list[dict[str, Any]]:
    """Batches of several shapes with padding (ids drawn from the vocabulary: no data exists here)."""
    import torch  # lazy: loads torch

    generator = torch.Generator().manual_seed(seed)
    limit = min(int(config.get("max_position_embeddings", 512)), 48)
    batches = []
    for batch, length in ((1, 5), (3, limit // 2), (4, limit)):
        ids = torch.randint(1000 if config["vocab_size"] > 2000 else 1, config["vocab_size"], (batch, length),
                            generator=generator)
        lengths = torch.randint(2, length + 1, (batch,), generator=generator)
        lengths[0] = length
        mask = (torch.arange(length)[None, :] < lengths[:, None]).long()
        types = ((torch.arange(length)[None, :] >= (lengths[:, None] // 2)) & mask.bool()).long()
        batches.append({"input_ids": ids * mask, "token_type_ids": types, "attention_mask": mask})
    return batches


def check_conversion(tf_ckpt_path: str, out_dir: str, architecture: str, hf_config: dict[str, Any]) -> ParityReport:
    """TF (the checkpoint as it is) against transformers (the converted directory) on the same batches."""
    tf = require_tensorflow()
    transformers = require("transformers", "export_pt's check (check_outputs: true; false skips it)")
    with local_checkpoint(tf_ckpt_path) as prefix:
        reader = tf.train.load_checkpoint(prefix)
        google = {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}
    head = {"BertForSequenceClassification": "classification", "BertForMaskedLM": "lm",
            "BertForPreTraining": "pretrain"}.get(architecture, "encoder")
    config = {"hidden_act": "gelu", "layer_norm_eps": 1e-12, **hf_config}
    hf_model = getattr(transformers, architecture).from_pretrained(out_dir).eval()
    tf_model = build_tf_bert(google, config, head if head != "encoder" else "lm", google_names=True)

    def tf_outputs(batch: dict[str, Any]) -> Any:
        inputs = [tf.constant(batch[n].numpy()) for n in ("input_ids", "token_type_ids", "attention_mask")]
        if head == "encoder":
            return tf_model.encode(*inputs).numpy()
        out = tf_model.serve(*inputs)
        return [out[k].numpy() for k in ("mlm_logits", "sop_logits")] if head == "pretrain" else out["logits"].numpy()

    def hf_outputs(batch: dict[str, Any]) -> Any:
        out = hf_model(**batch)
        if head == "encoder":
            return out.last_hidden_state
        if head == "pretrain":
            return out.prediction_logits, out.seq_relationship_logits
        return out.logits.squeeze(-1) if out.logits.size(-1) == 1 and head == "classification" else out.logits

    return check_parity(tf_outputs, hf_outputs, probe_batches(config), f"converted {architecture}", atol=1e-4,
                        rtol=1e-4)
