"""``pretrained_model`` (and x-prepro's ``tokenizer_dir``) as a Hugging Face Hub name (``FacebookAI/roberta-base``),
resolved from the local cache only, and the config.json of a transformers model folder. Imports neither torch nor transformers at
module level, so ``x-train --dry`` can check a pretrained_model without them.

A name resolves when the machine's Hugging Face cache (``HF_HOME``, ``HF_HUB_CACHE``) holds a snapshot of it:
nothing is downloaded, ever (``local_files_only``, as under ``HF_HUB_OFFLINE=1``). When it holds none the
error says what to do: download it on a machine with network and copy the cache over, or point
pretrained_model at a folder.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from xdpx import io
from xdpx.config.errors import ConfigError
from xdpx.config.writers import read_args
from xdpx.models.checkpoints import CheckpointError
from xdpx.utils.optional import require

# owner/name as the Hub spells repositories (letters, digits, - _ .); a bare name (bert-base-uncased) too
HUB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*(/[A-Za-z0-9][A-Za-z0-9_.\-]*)?$")
CONFIG_FILE = "config.json"
# keys of a config.json that describe the file, not the model; they stay out of args.py
NOT_ARCHITECTURE = ("_name_or_path", "transformers_version", "architectures", "torch_dtype", "dtype",
                    "_attn_implementation_autoset", "auto_map")


def looks_like_hub_name(path: str) -> bool:
    """Whether ``path`` can only be a Hub name: it is no existing path, has no scheme, alias or ./ prefix."""
    return bool(HUB_NAME.match(path)) and ".." not in path and not path.endswith((".pt", ".bin", ".safetensors"))


@lru_cache(maxsize=32)
def local_pretrained(path: str, key: str = "pretrained_model") -> str:
    """``path`` itself when it exists (or is remote or an alias); a cached Hub snapshot folder for a Hub name.

    Raises :class:`CheckpointError` (one line: what to do) for a Hub name the cache does not hold. ``key``
    is the option the path came from (pretrained_model, x-prepro's tokenizer_dir): the message names it."""
    if io.is_remote(path) or "<" in path or io.exists(path) or not looks_like_hub_name(path):
        return path

    require("transformers", f"{key} {path!r} (a Hugging Face Hub name)")
    import huggingface_hub  # lazy: huggingface_hub, only for a Hub name
    from huggingface_hub.errors import LocalEntryNotFoundError  # lazy: huggingface_hub, only for a Hub name
    from huggingface_hub.utils import HFValidationError  # lazy: huggingface_hub, only for a Hub name

    try:
        return huggingface_hub.snapshot_download(repo_id=path, local_files_only=True)
    except (LocalEntryNotFoundError, HFValidationError, FileNotFoundError, OSError):
        cache = huggingface_hub.constants.HF_HUB_CACHE
        raise CheckpointError(
            f"{path!r} is no local folder or file, and the Hugging Face cache ({cache}) holds no model of that "
            f"name; nothing is downloaded at run time: download it on a machine with network "
            f"(`hf download {path}`) and copy the cache (HF_HOME) here, or point {key} at the "
            "model's folder (config.json, weights, tokenizer files)") from None


def hf_config_of(path: str | None) -> dict[str, Any] | None:
    """The architecture in ``path``'s config.json (a folder, a Hub name in the cache, a weights file beside
    one), or the ``hf_config`` of the x-train run a checkpoint or ``<best>`` belongs to; None without either."""
    if not path:
        return None
    try:
        local = local_pretrained(path)
    except CheckpointError as e:  # while the config is resolved: a config error, before any work

        raise ConfigError(f"key 'pretrained_model': {e}") from None
    return _read_config(local)


@lru_cache(maxsize=16)
def _read_config(local: str) -> dict[str, Any] | None:
    base = local.rstrip("/")
    for alias in ("<best>", "<last>"):
        if base.endswith(alias):
            base = base[: -len(alias)].rstrip("/") or "."
    folder = base if io.isdir(base) else io.dirname(base)
    candidate = io.join(folder, CONFIG_FILE)
    if io.exists(candidate):
        with io.open(candidate) as f:
            config = json.load(f)
        if "model_type" in config:
            return {k: v for k, v in config.items() if k not in NOT_ARCHITECTURE}
    args_file = io.join(folder, "args.py")
    if io.exists(args_file):
        saved = read_args(args_file).get("hf_config")
        return dict(saved) if saved else None
    return None
