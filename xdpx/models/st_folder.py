"""A sentence-transformers folder (``SentenceTransformer.save``: modules.json) as ``pretrained_model``.

    modules.json                       the pipeline: Transformer -> Pooling [-> Normalize]
    <Transformer's path>/config.json   the encoder: a transformers model folder ("" : the folder itself;
                                       0_Transformer/ in folders of old releases)
    1_Pooling/config.json              cls / mean / max / lasttoken (sentence-transformers 2-6 spell it
                                       pooling_mode or pooling_mode_*_token booleans)
    N_Normalize/                       L2 normalisation

The encoder's weights and architecture are read from the Transformer's folder; a bi-encoder's ``pooling`` and
``normalize`` default to the folder's, so the model before training embeds as ``SentenceTransformer(folder)``.
What the bi-encoder cannot reproduce is a :attr:`STFolder.problem`, refused with the config: another module
(Dense, LayerNorm, a router...), a pooling it lacks (weightedmean, mean_sqrt_len_tokens, several
concatenated), a default prompt, a lower-casing Transformer. Reads json only (no torch, no
sentence-transformers), so ``x-train --dry`` checks it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from xdpx import io
from xdpx.models.checkpoints import CheckpointError
from xdpx.models.hf_hub import local_pretrained

MODULES_FILE = "modules.json"
# sentence-transformers' pooling names -> ours
POOLINGS = {"cls": "cls", "mean": "mean", "max": "max", "lasttoken": "last"}
# the booleans of Pooling configs before sentence-transformers 6
LEGACY_POOLING_KEYS = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean",
                       "pooling_mode_max_tokens": "max", "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
                       "pooling_mode_weightedmean_tokens": "weightedmean", "pooling_mode_lasttoken": "lasttoken"}
LONGEST_NAMED = 100_000  # a tokenizer's model_max_length above this is transformers' "no limit" sentinel


@dataclass(frozen=True)
class STFolder:
    """What a sentence-transformers folder says about the bi-encoder it stands for."""

    root: str
    transformer: str  # the folder with the encoder's config.json and weights
    pooling: str | None  # ours (cls, mean, max, last); None with a problem
    normalize: bool
    max_seq_length: int | None
    problem: str | None  # why a bi-encoder cannot give its embeddings (None: it can)


def _read_json(path: str) -> Any:
    with io.open(path) as f:
        return json.load(f)


def _kind(entry: dict[str, Any]) -> str:
    """Transformer, Pooling, Normalize... (module types are spelt sentence_transformers.models.Pooling or,
    since 5, sentence_transformers.<part>.modules.pooling.Pooling)."""
    return str(entry.get("type", "")).rsplit(".", 1)[-1]


def _pooling(config: dict[str, Any]) -> tuple[str | None, str | None]:
    """(our pooling, None) or (None, why not)."""
    mode = config.get("pooling_mode")
    if mode is None:
        modes = [name for key, name in LEGACY_POOLING_KEYS.items() if config.get(key)] or ["mean"]
    else:
        modes = [mode] if isinstance(mode, str) else list(mode)
    if len(modes) > 1:
        return None, f"its Pooling concatenates {' + '.join(modes)}; a bi-encoder pools one way (cls, mean, max, last)"
    if modes[0] not in POOLINGS:
        return None, (f"its Pooling is {modes[0]}; a bi-encoder pools by "
                      f"{', '.join(f'{ours} ({theirs})' for theirs, ours in POOLINGS.items())}")
    return POOLINGS[modes[0]], None


def _max_seq_length(root: str, transformer: str) -> int | None:
    """sentence_bert_config.json's max_seq_length (old releases), else the tokenizer's model_max_length."""
    for folder in dict.fromkeys((transformer, root)):
        path = io.join(folder, "sentence_bert_config.json")
        if io.exists(path) and _read_json(path).get("max_seq_length"):
            return int(_read_json(path)["max_seq_length"])
    path = io.join(transformer, "tokenizer_config.json")
    longest = _read_json(path).get("model_max_length") if io.exists(path) else None
    return int(longest) if isinstance(longest, (int, float)) and longest <= LONGEST_NAMED else None


@lru_cache(maxsize=16)
def read_st_folder(path: str | None) -> STFolder | None:
    """The sentence-transformers folder ``path`` (a local folder or a Hub name in the cache), None when it
    is none (no modules.json: a transformers folder, a checkpoint, an earlier run)."""
    if not path or "<" in path:
        return None
    try:
        root = local_pretrained(path).rstrip("/")
    except CheckpointError:  # the pretrained_model checks say so
        return None
    if io.is_remote(root) or not io.isdir(root) or not io.exists(io.join(root, MODULES_FILE)):
        return None
    modules = sorted(_read_json(io.join(root, MODULES_FILE)), key=lambda m: int(m.get("idx", 0)))
    kinds = [_kind(m) for m in modules]
    problem: str | None = None
    first = modules[0] if modules else {}
    transformer = io.join(root, first["path"]) if first.get("path") else root
    if kinds[:2] != ["Transformer", "Pooling"] or any(k != "Normalize" for k in kinds[2:]):
        problem = (f"its modules are {' -> '.join(kinds)}; a bi-encoder reproduces Transformer -> Pooling "
                   "[-> Normalize]")
    pooling, why = _pooling(_read_json(io.join(root, modules[1]["path"], "config.json"))) \
        if problem is None else (None, None)
    problem = problem or why
    settings = io.join(root, "config_sentence_transformers.json")
    prompt = _read_json(settings).get("default_prompt_name") if io.exists(settings) else None
    if problem is None and prompt:
        problem = (f"it puts its default prompt {prompt!r} before every text; a bi-encoder embeds the texts as "
                   "they are (set default_prompt_name to null in config_sentence_transformers.json)")
    lower = io.join(transformer, "sentence_bert_config.json")
    if problem is None and io.exists(lower) and _read_json(lower).get("do_lower_case"):
        problem = ("its Transformer lower-cases the texts (do_lower_case: true in sentence_bert_config.json); "
                   "x-prepro's tokenizer_dir tokenizer does not")
    return STFolder(root=root, transformer=transformer, pooling=pooling, normalize="Normalize" in kinds,
                    max_seq_length=_max_seq_length(root, transformer), problem=problem)


def transformer_folder(path: str | None) -> str | None:
    """The folder of ``path``'s encoder: the Transformer module's of a sentence-transformers folder, else ``path``."""
    folder = read_st_folder(path)
    return folder.transformer if folder is not None else path
