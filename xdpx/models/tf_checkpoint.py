"""TF BERT checkpoints (Google's names, e.g. ``bert/encoder/layer_0/attention/self/query/kernel``) to and
from Hugging Face names (``bert.encoder.layer.0.attention.self.query.weight``), as numpy arrays.

TF dense kernels are ``[in, out]``; torch Linear weights are ``[out, in]``: kernels are transposed on the
way in and out. Embedding tables and the classifier's ``output_weights`` (``[num_labels, hidden]`` in
Google's run_classifier.py) keep their layout. Optimizer slots (``adam_m``, ``adam_v``) and counters
(``global_step``) are skipped. A SavedModel written by export_tf reads back too (its variables are the
HF-named weights). TensorFlow is imported only inside the functions (optional extra
``xdpx[tf]``); remote checkpoints (s3://, oss://...) are fetched to a local temp folder first.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from xdpx import io
from xdpx.errors import UserError
from xdpx.utils.optional import require

# (TF name pattern, HF name template, transpose?) in both directions; {n} is a layer number.
_LAYER = r"bert/encoder/layer_(\d+)/"
_RULES: list[tuple[str, str, bool]] = [
    ("bert/embeddings/word_embeddings", "bert.embeddings.word_embeddings.weight", False),
    ("bert/embeddings/token_type_embeddings", "bert.embeddings.token_type_embeddings.weight", False),
    ("bert/embeddings/position_embeddings", "bert.embeddings.position_embeddings.weight", False),
    ("bert/embeddings/LayerNorm/gamma", "bert.embeddings.LayerNorm.weight", False),
    ("bert/embeddings/LayerNorm/beta", "bert.embeddings.LayerNorm.bias", False),
    ("bert/pooler/dense/kernel", "bert.pooler.dense.weight", True),
    ("bert/pooler/dense/bias", "bert.pooler.dense.bias", False),
    ("cls/predictions/transform/dense/kernel", "cls.predictions.transform.dense.weight", True),
    ("cls/predictions/transform/dense/bias", "cls.predictions.transform.dense.bias", False),
    ("cls/predictions/transform/LayerNorm/gamma", "cls.predictions.transform.LayerNorm.weight", False),
    ("cls/predictions/transform/LayerNorm/beta", "cls.predictions.transform.LayerNorm.bias", False),
    ("cls/predictions/output_bias", "cls.predictions.bias", False),
    ("cls/seq_relationship/output_weights", "cls.seq_relationship.weight", False),
    ("cls/seq_relationship/output_bias", "cls.seq_relationship.bias", False),
    ("output_weights", "classifier.weight", False),
    ("output_bias", "classifier.bias", False),
]
_LAYER_RULES: list[tuple[str, str, bool]] = []
for _tf, _hf in [("attention/self/query", "attention.self.query"), ("attention/self/key", "attention.self.key"),
                 ("attention/self/value", "attention.self.value"), ("attention/output/dense", "attention.output.dense"),
                 ("intermediate/dense", "intermediate.dense"), ("output/dense", "output.dense")]:
    _LAYER_RULES += [(f"{_tf}/kernel", f"{_hf}.weight", True), (f"{_tf}/bias", f"{_hf}.bias", False)]
for _tf, _hf in [("attention/output/LayerNorm", "attention.output.LayerNorm"), ("output/LayerNorm", "output.LayerNorm")]:
    _LAYER_RULES += [(f"{_tf}/gamma", f"{_hf}.weight", False), (f"{_tf}/beta", f"{_hf}.bias", False)]

_TF_TO_HF = {tf: (hf, t) for tf, hf, t in _RULES}
_HF_TO_TF = {hf: (tf, t) for tf, hf, t in _RULES}
_LAYER_TF = {tf: (hf, t) for tf, hf, t in _LAYER_RULES}
_LAYER_HF = {hf: (tf, t) for tf, hf, t in _LAYER_RULES}
_HF_LAYER = re.compile(r"^bert\.encoder\.layer\.(\d+)\.(.+)$")
# Variables of training, not of the model.
_SKIPPED = re.compile(r"(^|/)(adam_m|adam_v|Adam|Adam_1|global_step|beta1_power|beta2_power|bad_steps|good_steps|"
                      r"loss_scale)(/|$)")
# Names that tied weights duplicate in a state_dict (the MLM decoder shares the word embeddings).
TIED_KEYS = ("cls.predictions.decoder.weight", "cls.predictions.decoder.bias")


def tf_to_hf_name(name: str) -> tuple[str, bool] | None:
    """The HF name of a TF variable and whether its value is transposed; None for unknown names."""
    name = name.split("/.ATTRIBUTES/")[0]  # TF2 object-based checkpoints add this suffix
    if name in _TF_TO_HF:
        return _TF_TO_HF[name]
    match = re.match(_LAYER + "(.+)$", name)
    if match and match.group(2) in _LAYER_TF:
        hf, transpose = _LAYER_TF[match.group(2)]
        return f"bert.encoder.layer.{match.group(1)}.{hf}", transpose
    return None


def hf_to_tf_name(name: str) -> tuple[str, bool] | None:
    """The Google TF name of an HF parameter and whether it is transposed; None for names TF lacks."""
    if name in _HF_TO_TF:
        return _HF_TO_TF[name]
    match = _HF_LAYER.match(name)
    if match and match.group(2) in _LAYER_HF:
        tf, transpose = _LAYER_HF[match.group(2)]
        return f"bert/encoder/layer_{match.group(1)}/{tf}", transpose
    return None


def require_tensorflow() -> Any:
    """TensorFlow, or one line naming the extra that installs it (tensorflow-cpu)."""
    return require("tensorflow", "reading or writing a TF checkpoint")


@contextmanager
def local_checkpoint(path: str) -> Iterator[str]:
    """A local checkpoint prefix for ``path``: a prefix (``.../bert_model.ckpt``), or a folder holding one
    (its ``checkpoint`` file names it, else the single ``*.index`` in it); remote ones are downloaded."""

    if io.isdir(path):
        names = io.listdir(path)
        indexes = sorted(n[: -len(".index")] for n in names if n.endswith(".index"))
        chosen = None
        if "checkpoint" in names:
            with io.open(io.join(path, "checkpoint")) as f:
                match = re.search(r'^model_checkpoint_path:\s*"([^"]+)"', f.read(), re.M)
            chosen = os.path.basename(match.group(1)) if match else None
        if chosen is None and len(indexes) == 1:
            chosen = indexes[0]
        if chosen is None:
            raise UserError(f"{path}: no TF checkpoint found (expected one *.index file or a 'checkpoint' file; "
                            f"found {', '.join(indexes) or 'none'}): give the prefix, e.g. {path}/bert_model.ckpt")
        path = io.join(path, chosen)
    parent, prefix = io.dirname(path), io.basename(path)
    files = [n for n in (io.listdir(parent) if io.isdir(parent) else []) if n.startswith(prefix + ".")]
    if f"{prefix}.index" not in files:
        raise UserError(f"{path}: not a TF checkpoint ({path}.index does not exist); give the prefix of the "
                        "checkpoint files, e.g. bert_model.ckpt for bert_model.ckpt.index / .data-00000-of-00001")
    if not io.is_remote(path):
        yield io.abspath(path)
        return
    with tempfile.TemporaryDirectory(prefix="xdpx-tf-") as tmp:
        for name in files:
            io.copy(io.join(parent, name), os.path.join(tmp, name))
        yield os.path.join(tmp, prefix)


def read_export_savedmodel(path: str) -> dict[str, np.ndarray]:
    """HF-named arrays of a SavedModel written by export_tf (its variables are the HF-named weights)."""

    tf = require_tensorflow()
    suffix = "/.ATTRIBUTES/VARIABLE_VALUE"
    with tempfile.TemporaryDirectory(prefix="xdpx-tf-") as tmp:
        local = path
        if io.is_remote(path):
            local = os.path.join(tmp, "savedmodel")
            io.copytree(path, local)
        reader = tf.train.load_checkpoint(os.path.join(local, "variables", "variables"))
        weights = {}
        for key in reader.get_variable_to_shape_map():
            if key.startswith("w/") and key.endswith(suffix):
                # object-graph keys escape '/' as '.S' and '.' as '..'; our variable names are HF names with '/'
                name = re.sub(r"\.(S|\.)", lambda m: "/" if m.group(1) == "S" else ".", key[2: -len(suffix)])
                weights[name.replace("/", ".")] = np.asarray(reader.get_tensor(key))
    if not weights:
        raise UserError(f"{path}: a SavedModel that export_tf did not write (no BERT weights found); give the "
                        "TF checkpoint (bert_model.ckpt) instead")
    return weights


def read_tf_bert_checkpoint(path: str, skip_unknown: bool = True) -> dict[str, np.ndarray]:
    """HF-named float arrays of a TF BERT checkpoint (prefix or folder, local or remote), or of a
    SavedModel folder written by export_tf.

    MLM checkpoints also get the tied names (``cls.predictions.decoder.weight/bias``) so the result
    loads into BertForMaskedLM-keyed models without missing keys. Unknown variables are skipped
    (``skip_unknown``) or raise.
    """
    tf = require_tensorflow()
    if io.isdir(path) and io.exists(io.join(path, "saved_model.pb")):
        return _tie(read_export_savedmodel(path))
    weights: dict[str, np.ndarray] = {}
    unknown = []
    with local_checkpoint(path) as prefix:
        reader = tf.train.load_checkpoint(prefix)
        for name in sorted(reader.get_variable_to_shape_map()):
            if _SKIPPED.search(name) or name.startswith("_CHECKPOINTABLE_OBJECT_GRAPH"):
                continue
            mapped = tf_to_hf_name(name)
            if mapped is None:
                unknown.append(name)
                continue
            hf, transpose = mapped
            value = np.asarray(reader.get_tensor(name))
            weights[hf] = np.ascontiguousarray(value.T if transpose else value)
    if unknown and not skip_unknown:
        raise ValueError(f"{path}: variables with no BERT name: {unknown[:10]}")
    return _tie(weights)


def _tie(weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Add the MLM decoder's tied names, as a state_dict of BertForMaskedLM has them."""
    if "cls.predictions.bias" in weights and "bert.embeddings.word_embeddings.weight" in weights:
        weights["cls.predictions.decoder.weight"] = weights["bert.embeddings.word_embeddings.weight"]
        weights["cls.predictions.decoder.bias"] = weights["cls.predictions.bias"]
    return weights


def tf_named_weights(weights: dict[str, Any]) -> dict[str, np.ndarray]:
    """Google TF names and layouts for HF-named weights (tensors or arrays); tied duplicates dropped.

    Raises ValueError naming the parameters that have no TF BERT name (e.g. a model that is not BERT).
    """
    out: dict[str, np.ndarray] = {}
    unknown = []
    for name, value in weights.items():
        if name in TIED_KEYS or name.endswith("embeddings.position_ids"):
            continue
        mapped = hf_to_tf_name(name)
        if mapped is None:
            unknown.append(name)
            continue
        tf_name, transpose = mapped
        array = value.detach().float().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)
        out[tf_name] = np.ascontiguousarray(array.T if transpose else array)
    if unknown:
        raise ValueError(f"parameters with no TF BERT name: {unknown[:10]}")
    return out


def write_tf_bert_checkpoint(weights: dict[str, Any], out_dir: str, name: str = "bert_model.ckpt") -> str:
    """Write HF-named weights as a TF checkpoint with Google's names (out_dir/name.index + .data-*, and
    the 'checkpoint' file naming it), as tf.compat.v1 Saver would; return the prefix."""
    tf = require_tensorflow()
    named = tf_named_weights(weights)
    with tempfile.TemporaryDirectory(prefix="xdpx-tf-") as tmp:
        prefix = os.path.join(tmp, name)
        names = sorted(named)
        tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                          tensors=[tf.constant(named[n]) for n in names])
        with open(os.path.join(tmp, "checkpoint"), "w") as f:  # what Saver writes: tools look for it
            f.write(f'model_checkpoint_path: "{name}"\nall_model_checkpoint_paths: "{name}"\n')
        io.makedirs(out_dir)
        for file in os.listdir(tmp):
            io.copy(os.path.join(tmp, file), io.join(out_dir, file))
    return io.join(out_dir, name)
