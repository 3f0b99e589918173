"""BERT as a TensorFlow SavedModel: the same computation written in TF ops over the run's weights
(embeddings, post-LayerNorm encoder layers, pooler, heads), saved with one serving signature.

Inputs ``input_ids``, ``token_type_ids``, ``attention_mask`` (int64 ``[batch, length]``; the length is
``max_len`` with fix_len, else dynamic); outputs ``logits`` (classification ``[B, classes]``, regression
``[B]``, MLM ``[B, T, vocab]``) or ``mlm_logits`` and ``sop_logits`` for bert_pretrain. TensorFlow is
imported inside the functions (optional extra ``xdpx[tf]``).
"""

from __future__ import annotations

import math
import os
import tempfile
from typing import Any

import numpy as np

from xdpx import io
from xdpx.errors import UserError
from xdpx.export.parity import ParityReport, check_parity, parity_batches

INPUTS = ("input_ids", "token_type_ids", "attention_mask")
SAVEDMODEL_MODELS = ("bert_classification", "bert_pair", "bert_lm", "bert_pretrain")


def _activation(tf: Any, name: str) -> Any:
    table = {"gelu": lambda x: tf.nn.gelu(x, approximate=False), "gelu_new": lambda x: tf.nn.gelu(x, approximate=True),
             "gelu_pytorch_tanh": lambda x: tf.nn.gelu(x, approximate=True), "relu": tf.nn.relu,
             "silu": tf.nn.silu, "swish": tf.nn.silu, "tanh": tf.math.tanh}
    if name not in table:
        raise UserError(f"export_tf: hidden_act {name!r} has no TF equivalent here (supported: {', '.join(table)})")
    return table[name]


def build_tf_bert(weights: dict[str, np.ndarray], config: dict[str, Any], head: str,
                  pooling: str = "cls", fix_len: int | None = None, google_names: bool = False) -> Any:
    """A tf.Module computing our BERT model; ``head`` is classification / lm / pretrain.

    ``weights`` have HF names and layouts, or with ``google_names`` the names and layouts of a Google TF
    checkpoint (kernels ``[in, out]``), so a TF checkpoint runs as it is, without our conversion.
    """
    import tensorflow as tf

    from xdpx.models.tf_checkpoint import hf_to_tf_name

    act = _activation(tf, config["hidden_act"])
    eps = float(config["layer_norm_eps"])
    heads = int(config["num_attention_heads"])
    layers = int(config["num_hidden_layers"])

    def stored(name: str) -> tuple[str, bool]:
        """The key of HF parameter ``name`` in ``weights`` and whether it is stored transposed."""
        if not google_names:
            return name, False
        mapped = hf_to_tf_name(name)
        if mapped is None:
            raise KeyError(f"{name} has no TF BERT name")
        return mapped

    classifier = weights[stored("classifier.weight")[0]] if head == "classification" else None
    regression = classifier is not None and classifier.shape[0] == 1

    class TFBert(tf.Module):
        def __init__(self) -> None:
            super().__init__(name="bert")
            # Kept as (non-trainable) variables so the SavedModel stores each weight once, by name.
            self.w = {k.replace(".", "/"): tf.Variable(v, trainable=False, name=k.replace(".", "/"))
                      for k, v in weights.items()}

        def p(self, name: str) -> Any:
            return self.w[stored(name)[0].replace(".", "/")]

        def dense(self, x: Any, prefix: str) -> Any:
            key, kernel = stored(f"{prefix}.weight")  # a TF kernel is [in, out]; a torch weight [out, in]
            return tf.matmul(x, self.w[key.replace(".", "/")], transpose_b=not kernel) + self.p(f"{prefix}.bias")

        def norm(self, x: Any, prefix: str) -> Any:
            mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
            return (x - mean) * tf.math.rsqrt(variance + eps) * self.p(f"{prefix}.weight") + self.p(f"{prefix}.bias")

        def encode(self, input_ids: Any, token_type_ids: Any, attention_mask: Any) -> Any:
            length = tf.shape(input_ids)[1]
            x = (tf.gather(self.p("bert.embeddings.word_embeddings.weight"), input_ids)
                 + tf.gather(self.p("bert.embeddings.token_type_embeddings.weight"), token_type_ids)
                 + self.p("bert.embeddings.position_embeddings.weight")[:length][None])
            x = self.norm(x, "bert.embeddings.LayerNorm")
            batch, width = tf.shape(x)[0], x.shape[-1]
            size = width // heads
            # padding keys get -inf before the softmax (what SDPA's boolean mask does)
            bias = tf.where(tf.cast(attention_mask, tf.bool), 0.0, float("-inf"))[:, None, None, :]

            def split(t: Any) -> Any:
                return tf.transpose(tf.reshape(t, [batch, length, heads, size]), [0, 2, 1, 3])

            for n in range(layers):
                p = f"bert.encoder.layer.{n}"
                q, k, v = (split(self.dense(x, f"{p}.attention.self.{name}")) for name in ("query", "key", "value"))
                scores = tf.matmul(q, k, transpose_b=True) / math.sqrt(size) + bias
                context = tf.reshape(tf.transpose(tf.matmul(tf.nn.softmax(scores, axis=-1), v), [0, 2, 1, 3]),
                                     [batch, length, width])
                x = self.norm(self.dense(context, f"{p}.attention.output.dense") + x, f"{p}.attention.output.LayerNorm")
                inner = act(self.dense(x, f"{p}.intermediate.dense"))
                x = self.norm(self.dense(inner, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
            return x

        def pooled(self, hidden: Any, attention_mask: Any) -> Any:
            if pooling == "mean":
                m = tf.cast(attention_mask, hidden.dtype)[:, :, None]
                return tf.reduce_sum(hidden * m, 1) / tf.maximum(tf.reduce_sum(m, 1), 1.0)
            return tf.math.tanh(self.dense(hidden[:, 0], "bert.pooler.dense"))

        def mlm(self, hidden: Any) -> Any:
            h = self.norm(act(self.dense(hidden, "cls.predictions.transform.dense")),
                          "cls.predictions.transform.LayerNorm")
            return tf.matmul(h, self.p("bert.embeddings.word_embeddings.weight"), transpose_b=True) \
                + self.p("cls.predictions.bias")

        def serve(self, input_ids: Any, token_type_ids: Any, attention_mask: Any) -> dict[str, Any]:
            hidden = self.encode(input_ids, token_type_ids, attention_mask)
            if head == "lm":
                return {"logits": self.mlm(hidden)}
            if head == "pretrain":
                sop = self.dense(tf.math.tanh(self.dense(hidden[:, 0], "bert.pooler.dense")), "cls.seq_relationship")
                return {"mlm_logits": self.mlm(hidden), "sop_logits": sop}
            logits = self.dense(self.pooled(hidden, attention_mask), "classifier")
            return {"logits": tf.squeeze(logits, -1) if regression else logits}

    module = TFBert()
    spec = [tf.TensorSpec([None, fix_len], tf.int64, name=name) for name in INPUTS]
    module.serving = tf.function(module.serve, input_signature=spec, autograph=False)
    return module


def head_of(model_name: str) -> str:

    if model_name not in SAVEDMODEL_MODELS:
        raise UserError(f"export_tf: model {model_name!r} cannot be written as a TF SavedModel (supported: "
                        f"{', '.join(SAVEDMODEL_MODELS)}); use export_onnx or export_torchscript")
    return {"bert_lm": "lm", "bert_pretrain": "pretrain"}.get(model_name, "classification")


def pad_to(batch: dict[str, Any], length: int, pad_index: int) -> dict[str, Any]:
    """A batch padded to ``length`` (fix_len): ids with pad_index, token types and mask with 0."""
    import torch

    extra = length - batch["input_ids"].size(1)
    if extra < 0:
        raise ValueError(f"a batch of length {batch['input_ids'].size(1)} is longer than fix_len {length}")
    values = {"input_ids": pad_index, "token_type_ids": 0, "attention_mask": 0}
    return {k: torch.nn.functional.pad(v, (0, extra), value=values.get(k, 0)) for k, v in batch.items()}


def write_savedmodel(run: Any, out_dir: str, signature_def_key: str, fix_len: bool) -> int | None:
    """Save the run's model as a SavedModel in out_dir; return the fixed length (None when dynamic)."""
    import tensorflow as tf

    head = head_of(run.args.model)
    weights = {k: v.detach().float().cpu().numpy() for k, v in run.model.state_dict().items()
               if not k.startswith("cls.predictions.decoder.")}
    length = int(run.args.max_len) if fix_len else None
    module = build_tf_bert(weights, run.model.hf_config(), head, run.args.get("pooling", "cls"), length)
    with tempfile.TemporaryDirectory(prefix="xdpx-tf-") as tmp:
        local = out_dir if not io.is_remote(out_dir) else os.path.join(tmp, "savedmodel")
        tf.saved_model.save(module, local, signatures={signature_def_key: module.serving})
        if local != out_dir:
            io.copytree(local, out_dir)
    return length


def check_savedmodel(run: Any, out_dir: str, signature_def_key: str, fix_len: int | None,
                     samples: list[dict[str, Any]]) -> ParityReport:
    """Load the SavedModel with TensorFlow and compare its signature's outputs with the run's model."""
    import tensorflow as tf

    with tempfile.TemporaryDirectory(prefix="xdpx-tf-") as tmp:
        local = out_dir
        if io.is_remote(out_dir):
            local = os.path.join(tmp, "savedmodel")
            io.copytree(out_dir, local)
        serving = tf.saved_model.load(local).signatures[signature_def_key]
        batches = parity_batches(run.processor, samples)
        if fix_len:
            batches = [pad_to(b, fix_len, run.processor.pad_index) for b in batches]

        def tf_outputs(batch: dict[str, Any]) -> list[Any]:
            out = serving(**{n: tf.constant(batch[n].numpy()) for n in INPUTS})
            names = ["mlm_logits", "sop_logits"] if "sop_logits" in out else ["logits"]
            return [out[n].numpy() for n in names]

        return check_parity(lambda b: run.model(**b), tf_outputs, batches, "TF SavedModel", atol=1e-4, rtol=1e-4)
