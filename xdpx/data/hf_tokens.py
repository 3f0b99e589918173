"""The special tokens a Hugging Face model folder names (tokenizer_config.json, special_tokens_map.json):
the defaults of pad_word / unk_word under ``tokenizer: auto``, so a RoBERTa folder pads with ``<pad>``
without the user saying so. Imports nothing heavy (x-prepro --dry reads these files)."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from xdpx import io
from xdpx.data.tokenizing import tokenizer_folder
from xdpx.errors import UserError

TOKEN_FILES = ("tokenizer_config.json", "special_tokens_map.json")


@lru_cache(maxsize=16)
def special_tokens(folder: str) -> dict[str, str]:
    """``{"pad_token": "<pad>", "unk_token": "<unk>", ...}`` from the folder's tokenizer files ({} without)."""
    found: dict[str, str] = {}
    for name in reversed(TOKEN_FILES):  # tokenizer_config.json wins
        path = io.join(folder, name)
        if not io.exists(path):
            continue
        with io.open(path) as f:
            data = json.load(f)
        for key, value in data.items():
            if key.endswith("_token") and isinstance(value, dict):
                value = value.get("content")
            if key.endswith("_token") and isinstance(value, str):
                found[key] = value
    return found


def special_token_default(key: str, fallback: str) -> Any:
    """A computed option default: the ``key`` token of tokenizer_dir with tokenizer: auto, else ``fallback``."""

    def default(args: Any) -> str:
        folder = args.get("tokenizer_dir") if args.get("tokenizer") == "auto" else None
        if not folder:
            return fallback
        try:
            folder = tokenizer_folder(folder)
        except UserError:  # a Hub name the cache lacks: x-prepro's check of tokenizer_dir says so, once
            return fallback
        return special_tokens(folder).get(key, fallback)

    return default
