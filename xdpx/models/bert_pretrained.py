"""Loading pretrained BERT weights into our models (key for key with Hugging Face).

``pretrained_model`` may be:
- a Hugging Face directory (config.json + model.safetensors or pytorch_model.bin), local or remote;
- one such weights file (.safetensors / .bin / .pt);
- a checkpoint of an earlier x-train run, or its alias ``${save_dir}/<best>`` / ``<last>``;
- with ``from_tf: true``, a TF checkpoint (prefix such as bert_model.ckpt, or its directory), read by
  xdpx.models.tf_checkpoint.read_tf_bert_checkpoint (needs TensorFlow: pip install 'xdpx[tf]').

Names are normalised to ours: a bare BertModel's keys get the ``bert.`` prefix, old ``gamma``/``beta``
LayerNorm names become ``weight``/``bias``. Missing and unexpected keys are logged; shapes that differ
and a file that shares no key with the model are errors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors

from xdpx import io
from xdpx.errors import UserError
from xdpx.models.checkpoints import CheckpointError, load_weights, resolve_checkpoint
from xdpx.models.hf_hub import local_pretrained
from xdpx.models.tf_checkpoint import read_tf_bert_checkpoint

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
# Buffers some checkpoints carry that are not parameters of ours (recomputed in forward).
IGNORED_SUFFIXES = ("embeddings.position_ids",)


def _user_error(message: str) -> Exception:

    return UserError(message)


def weights_file(path: str) -> str:
    """The weights file behind ``path`` (a directory's model.safetensors / pytorch_model.bin, an alias)."""
    if io.isdir(path):
        for name in WEIGHT_FILES:
            if io.exists(io.join(path, name)):
                return io.join(path, name)
        raise _user_error(f"pretrained_model {path}: the directory holds none of {', '.join(WEIGHT_FILES)} "
                          "(a Hugging Face BERT directory has config.json and one of them)")
    try:
        return resolve_checkpoint(path)
    except CheckpointError as e:
        raise _user_error(f"pretrained_model: {e}") from None


def read_weights(path: str, from_tf: bool = False) -> dict[str, Any]:
    """``{name: tensor}`` from any of the supported forms (safetensors or torch.load(weights_only=True))."""
    if from_tf:
        # TensorFlow is imported by read_tf_bert_checkpoint: a missing one is a one-line error (the [tf] extra)
        return {k: torch.from_numpy(v.copy()) for k, v in read_tf_bert_checkpoint(path).items()}
    file = weights_file(path)
    if file.endswith(".safetensors"):
        with io.open(file, "rb") as f:
            data = f.read()
        try:
            return dict(load_safetensors(data))
        except SafetensorError as e:  # a cut file or a damaged header
            raise _user_error(f"{file} is not a readable safetensors file: it is truncated or corrupt "
                              f"({type(e).__name__}: {e})") from None

    return dict(load_weights(file))


def normalise_keys(weights: dict[str, Any], own_keys: set[str]) -> dict[str, Any]:
    """HF name variants to ours: prefix ``bert.`` for a bare encoder, gamma/beta -> weight/bias."""
    out = {}
    for key, value in weights.items():
        if key.endswith(IGNORED_SUFFIXES):
            continue
        key = key.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
        if key not in own_keys and f"bert.{key}" in own_keys:
            key = f"bert.{key}"
        out[key] = value
    return out


def load_into(model: Any, path: str, from_tf: bool = False, log: Callable[[str], Any] = print) -> dict[str, list[str]]:
    """Load ``path`` into ``model`` (strict=False); log and return the missing and unexpected keys."""
    own = model.state_dict()
    try:  # a Hugging Face Hub name: the snapshot folder in the local cache
        local = local_pretrained(path) if not from_tf else path
    except CheckpointError as e:
        raise _user_error(f"pretrained_model: {e}") from None
    weights = normalise_keys(read_weights(local, from_tf), set(own))
    # in the model's order (embeddings, then layer 0 up): the first five named are the first that differ
    mismatched = [f"{k} {tuple(weights[k].shape)} vs ours {tuple(v.shape)}" for k, v in own.items()
                  if k in weights and tuple(v.shape) != tuple(weights[k].shape)]
    vocab_key = next((k for k in weights if k.endswith("word_embeddings.weight") and k in own), None)
    if vocab_key is not None and own[vocab_key].shape[0] != weights[vocab_key].shape[0]:
        # the message names what differs: the number of tokens, not the tokenizer or the other options
        raise _user_error(f"pretrained_model {path}: its vocabulary has {weights[vocab_key].shape[0]} tokens, the "
                          f"data's vocab.txt {own[vocab_key].shape[0]} (vocab_size in data_dir's meta.hjson): run "
                          "x-prepro with the model's vocab.txt as vocab_file (tokenizer: bert) or its folder as "
                          "tokenizer_dir (tokenizer: auto)")
    if mismatched:
        raise _user_error(f"pretrained_model {path}: shapes differ: {'; '.join(mismatched[:5])}. The "
                          "architecture options (hidden_size, num_hidden_layers, intermediate_size...) must match "
                          "the pretrained model; remove the ones you set")
    if not any(k in own for k in weights):
        raise _user_error(f"pretrained_model {path}: no parameter name matches this model (first names "
                          f"in the file: {list(weights)[:3]}): is it a BERT checkpoint?")
    result = model.load_state_dict(weights, strict=False)
    # tied tensors (decoder = word embeddings, decoder.bias = cls.predictions.bias) are saved once by
    # save_pretrained: a key is not missing when a name of the same tensor was loaded
    names_of: dict[int, set[str]] = {}
    for name, tensor in model.state_dict(keep_vars=True).items():
        names_of.setdefault(id(tensor), set()).add(name)
    loaded = set(weights) - set(result.unexpected_keys)
    missing = [k for k, tensor in model.state_dict(keep_vars=True).items()
               if k in result.missing_keys and not names_of[id(tensor)] & loaded]
    log(f"loaded pretrained_model {path}: {len(weights) - len(result.unexpected_keys)} tensors"
        + (f"; missing keys (left at their initial values): {missing}" if missing else "; no missing keys")
        + (f"; unexpected keys (ignored): {result.unexpected_keys}" if result.unexpected_keys else ""))
    return {"missing": missing, "unexpected": list(result.unexpected_keys)}
