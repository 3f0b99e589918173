"""A run as a TensorFlow SavedModel: BERT written here in TF ops over the run's weights (embeddings,
post-LayerNorm encoder layers, pooler, heads), the non-transformer models in tf_students.py, raw-text
inputs (init_tables) in tf_text.py; saved with one serving signature (two with init_tables).

Inputs ``input_ids``, ``token_type_ids``, ``attention_mask`` for BERT, the processor's ``tokens`` or
``tokens1``, ``tokens2`` for the others (int64 ``[batch, length]``; the length is ``max_len`` with
fix_len, else dynamic); outputs ``logits`` (classification ``[B, classes]``, regression
``[B]``, MLM ``[B, T, vocab]``) or ``mlm_logits`` and ``sop_logits`` for bert_pretrain. TensorFlow is
imported inside the functions (optional extra ``xdpx[tf]``).
"""

from __future__ import annotations

import math
import os
import tempfile
from dataclasses import dataclass
from typing import Any

import numpy as np

from xdpx import io
from xdpx.errors import UserError
from xdpx.export.companions import labels_of
from xdpx.export.parity import check_parity, parity_batches
from xdpx.export.tf_students import STUDENT_INPUTS, build_tf_student
from xdpx.export.tf_text import attach_text_serving, check_text_savedmodel, check_text_tokenizer
from xdpx.models.tf_checkpoint import hf_to_tf_name

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
    import tensorflow as tf  # lazy: optional tensorflow

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
                        f"{', '.join(SAVEDMODEL_MODELS + tuple(STUDENT_INPUTS))}); use export_onnx or "
                        "export_torchscript")
    return {"bert_lm": "lm", "bert_pretrain": "pretrain"}.get(model_name, "classification")


def inputs_of(model_name: str) -> tuple[str, ...]:
    """The token inputs of the SavedModel of a model (BERT's three, or the student's token fields)."""
    if model_name in STUDENT_INPUTS:
        return STUDENT_INPUTS[model_name]
    head_of(model_name)  # a UserError for a model with no TF form
    return INPUTS


def pad_to(batch: dict[str, Any], length: int, pad_index: int) -> dict[str, Any]:
    """A batch padded to ``length`` (fix_len): ids with pad_index, token types and mask with 0."""
    import torch  # lazy: loads torch

    widest = max(v.size(1) for v in batch.values())
    if widest > length:
        raise ValueError(f"a batch of length {widest} is longer than fix_len {length}")
    values = {"token_type_ids": 0, "attention_mask": 0}
    return {k: torch.nn.functional.pad(v, (0, length - v.size(1)), value=values.get(k, pad_index))
            for k, v in batch.items()}


@dataclass
class SavedModelLayout:
    """What a written SavedModel takes and gives: its signatures, the token inputs, the fixed length."""

    signatures: dict[str, list[str]]  # signature name -> its input names
    token_inputs: tuple[str, ...]
    ids_signature: str  # the signature that takes token ids
    text_signature: str | None  # the one that takes raw strings (init_tables)
    fix_len: int | None


def build_module(run: Any, signature_def_key: str, length: int | None, init_tables: bool) -> tuple[Any, dict[str, Any],
                                                                                                  SavedModelLayout]:
    """The tf.Module of the run's model, its signature functions by name, and their layout."""
    from xdpx.models.modules.base import is_regression  # lazy: loads torch

    inputs = inputs_of(run.args.model)
    if init_tables:
        check_text_tokenizer(run.args)  # before any work: BERT's WordPiece and jieba have no TF form here
    if run.args.model in STUDENT_INPUTS:
        weights = {k: v.detach().float().cpu().numpy() for k, v in run.model.state_dict().items()}
        module = build_tf_student(weights, run.args, length)
        ids_serving = module.ids_serving
    else:
        weights = {k: v.detach().float().cpu().numpy() for k, v in run.model.state_dict().items()
                   if not k.startswith("cls.predictions.decoder.")}
        module = build_tf_bert(weights, run.model.hf_config(), head_of(run.args.model), run.args.get("pooling", "cls"),
                               length)
        ids_serving = module.serving
    if not init_tables:
        layout = SavedModelLayout({signature_def_key: list(inputs)}, inputs, signature_def_key, None, length)
        return module, {signature_def_key: ids_serving}, layout

    names = attach_text_serving(module, run.processor, run.args, inputs, labels_of(run), is_regression(run.args), length)
    ids_key = f"{signature_def_key}_ids"
    layout = SavedModelLayout({signature_def_key: names, ids_key: list(inputs)}, inputs, ids_key, signature_def_key,
                              length)
    return module, {signature_def_key: module.text_serving, ids_key: ids_serving}, layout


def write_savedmodel(run: Any, out_dir: str, signature_def_key: str, fix_len: bool,
                     init_tables: bool = False) -> SavedModelLayout:
    """Save the run's model as a SavedModel in out_dir; with ``init_tables`` its ``signature_def_key`` takes
    raw strings (and ``<signature_def_key>_ids`` token ids)."""
    import tensorflow as tf  # lazy: optional tensorflow

    length = int(run.args.max_len) if fix_len else None
    module, signatures, layout = build_module(run, signature_def_key, length, init_tables)
    with tempfile.TemporaryDirectory(prefix="xdpx-tf-") as tmp:
        local = out_dir if not io.is_remote(out_dir) else os.path.join(tmp, "savedmodel")
        tf.saved_model.save(module, local, signatures=signatures)
        if local != out_dir:
            io.copytree(local, out_dir)
    return layout


def check_savedmodel(run: Any, out_dir: str, layout: SavedModelLayout, samples: list[dict[str, Any]]) -> str:
    """Load the SavedModel with TensorFlow and compare its signatures' outputs with the run's model: the ids
    signature on batches of real samples, the raw-text one (init_tables) with x-pred on their texts."""
    import tensorflow as tf  # lazy: optional tensorflow

    student = run.args.model in STUDENT_INPUTS
    # the students' TF graphs follow the PyTorch ops one to one; BERT's attention sums differ more
    atol = 1e-5 if student else 1e-4
    with tempfile.TemporaryDirectory(prefix="xdpx-tf-") as tmp:
        local = out_dir
        if io.is_remote(out_dir):
            local = os.path.join(tmp, "savedmodel")
            io.copytree(out_dir, local)
        loaded = tf.saved_model.load(local)
        serving = loaded.signatures[layout.ids_signature]
        batches = [{n: b[n] for n in layout.token_inputs} for b in parity_batches(run.processor, samples)]
        if layout.fix_len:
            batches = [pad_to(b, layout.fix_len, run.processor.pad_index) for b in batches]

        def tf_outputs(batch: dict[str, Any]) -> list[Any]:
            out = serving(**{n: tf.constant(batch[n].numpy()) for n in layout.token_inputs})
            names = ["mlm_logits", "sop_logits"] if "sop_logits" in out else ["logits"]
            return [out[n].numpy() for n in names]

        report = check_parity(lambda b: run.model(**b), tf_outputs, batches, "TF SavedModel", atol=atol,
                              rtol=0 if student else 1e-4).describe()
        if layout.text_signature is None:
            return report
        from xdpx.models.modules.base import is_regression  # lazy: loads torch

        texts = check_text_savedmodel(loaded.signatures[layout.text_signature], run,
                                      layout.signatures[layout.text_signature], samples, layout.token_inputs,
                                      is_regression(run.args), atol)
        return f"{report}; {texts}"
