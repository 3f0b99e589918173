"""Checkpoint files of a run directory and the ``<best>`` / ``<last>`` aliases.

- ``checkpoint-<step>.pt``: the model's weights only (a state_dict; ``torch.load(weights_only=True)``).
- ``state.pt``: the full training state of the latest save (see xdpx/train/state.py); with
  ``save_full_checkpoint`` also ``state-<step>.pt`` beside each checkpoint.
- ``checkpoints.json``: ``{"best": "checkpoint-300.pt", "last": "checkpoint-400.pt", ...}``, rewritten
  (atomically) only after the checkpoint it names is complete, so an alias never points at a file
  being written. Every write goes through xdpx.io (temp file, then rename or one upload).

``resolve_checkpoint('runs/a/<best>')`` works for x-train's pretrained_model and for x-eval / x-pred.
"""

from __future__ import annotations

import json
import re
from typing import Any

from xdpx import io

INDEX_FILE = "checkpoints.json"
BEST, LAST = "<best>", "<last>"
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)\.pt$")


class CheckpointError(Exception):
    """A checkpoint path or alias that cannot be resolved."""


def checkpoint_name(step: int) -> str:
    return f"checkpoint-{step}.pt"


def full_state_name(step: int) -> str:
    return f"state-{step}.pt"


def list_checkpoints(save_dir: str) -> list[tuple[int, str]]:
    """(step, path) of every complete weights checkpoint in save_dir, by step."""
    if not io.isdir(save_dir):
        return []
    found = [(int(m.group(1)), io.join(save_dir, name)) for name in io.listdir(save_dir)
             if (m := _CHECKPOINT.match(name))]
    return sorted(found)


def read_index(save_dir: str) -> dict[str, Any]:
    path = io.join(save_dir, INDEX_FILE)
    if not io.exists(path):
        return {}
    with io.open(path) as f:
        return dict(json.load(f))


def write_index(save_dir: str, index: dict[str, Any]) -> None:
    with io.open(io.join(save_dir, INDEX_FILE), "w") as f:
        json.dump(index, f, indent=1)


def resolve_checkpoint(path: str) -> str:
    """A checkpoint path with ``<best>`` (best on valid_subset) or ``<last>`` (latest saved) resolved."""
    base = path.rstrip("/")
    for alias, key in ((BEST, "best"), (LAST, "last")):
        if base.endswith(alias):
            save_dir = base[: -len(alias)].rstrip("/") or "."
            index = read_index(save_dir)
            name = index.get(key)
            if name and io.exists(io.join(save_dir, name)):
                return io.join(save_dir, name)
            saved = list_checkpoints(save_dir)
            if key == "last" and saved:
                return saved[-1][1]
            raise CheckpointError(f"{path}: {save_dir!r} holds no checkpoint for {alias} yet")
    if not io.exists(path):
        raise CheckpointError(f"{path!r} does not exist")
    return path


def save_torch(obj: Any, path: str) -> None:
    """torch.save through xdpx.io: the file appears complete or not at all."""
    import torch

    with io.open(path, "wb") as f:
        torch.save(obj, f)


def load_torch(path: str) -> Any:
    """torch.load with weights_only=True (no code runs on load), from any xdpx.io path."""
    import torch

    with io.open(path, "rb") as f:
        return torch.load(f, map_location="cpu", weights_only=True)


def load_weights(path: str) -> dict[str, Any]:
    """The model state_dict of a weights checkpoint, a full state file, or an alias."""
    obj = load_torch(resolve_checkpoint(path))
    if isinstance(obj, dict) and "model" in obj and isinstance(obj["model"], dict) and "counters" in obj:
        return obj["model"]
    return obj


def load_weights_into(model: Any, path: str, strict: bool, say: Any = print, hint: str = "") -> None:
    """Load the weights at ``path`` into ``model``: shape mismatches fail; missing/unexpected keys fail
    when ``strict`` (a checkpoint of this very model), else they are listed through ``say`` (pretrained
    weights for another head...). ``hint`` ends the error messages (what to check)."""
    from xdpx.cli import UserError

    weights = load_weights(path)
    own = model.state_dict()
    mismatched = [f"{k} {tuple(v.shape)} vs the model's {tuple(own[k].shape)}" for k, v in weights.items()
                  if k in own and tuple(own[k].shape) != tuple(v.shape)]
    if mismatched:
        raise UserError(f"{path}: weight shapes differ from the model's: {'; '.join(mismatched[:5])}.{hint}")
    missing = sorted(set(own) - set(weights))
    unexpected = sorted(set(weights) - set(own))
    if strict and (missing or unexpected):
        raise UserError(f"{path} does not fit the model {type(model).__name__}: "
                        + (f"missing keys {missing[:10]}" if missing else "")
                        + ("; " if missing and unexpected else "")
                        + (f"unexpected keys {unexpected[:10]}" if unexpected else "") + f".{hint}")
    model.load_state_dict(weights, strict=False)
    report = (f"; missing keys (left as initialised): {missing}" if missing else "") + \
             (f"; unexpected keys (not used): {unexpected}" if unexpected else "")
    say(f"loaded {path}{report}")
