"""Weights files of a run directory (checkpoints, full training states) and the ``<best>`` / ``<last>`` aliases.

- ``checkpoint-<step>.pt``: the model's weights only (a state_dict; ``torch.load(weights_only=True)``).
- ``state.pt``: the full training state of the latest save (see xdpx/train/saving.py); with
  ``save_full_checkpoint`` also ``state-<step>.pt`` beside each checkpoint.
- ``checkpoints.json``: ``{"best": "checkpoint-300.pt", "last": "checkpoint-400.pt", ...}``, rewritten
  (atomically) only after the checkpoint it names is complete, so an alias never points at a file
  being written. Every write goes through xdpx.io (temp file, then rename or one upload).

``resolve_checkpoint('runs/a/<best>')`` works for x-train's pretrained_model and for x-eval / x-pred.
The file format lives on the components' floor (beside the models) because a model's pretrained weights
may be another run's checkpoint; x-train writes these files, every loading command reads them.
"""

from __future__ import annotations

import json
import re
import warnings
from typing import Any

from xdpx import io
from xdpx.errors import UserError
from xdpx.io.retry import is_transient

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
    import torch  # lazy: torch is heavy; x-prepro (and its --dry) starts without it

    with io.open(path, "wb") as f:
        torch.save(obj, f)


def _unreadable(path: str, error: Exception) -> Exception:
    """One clear line for a file torch.load refuses. torch's own text advises weights_only=False, which
    would run whatever code the file holds: that advice is never passed on."""
    import pickle  # lazy: pickle only to word a refused file; x-prepro --dry starts without it

    text = str(error)
    # A file cut within its first bytes is read as a (legacy) pickle whose first byte is no opcode at all:
    # that is damage, not a refused object.
    if isinstance(error, pickle.UnpicklingError) and "Unsupported operand" not in text:
        found = re.search(r"GLOBAL ([\w.]+)", text)
        what = f"a reference to {found.group(1)}, which is code, not weights" if found else \
            "pickled objects other than tensors, numbers, strings and containers"
        return UserError(f"{path} is refused as a checkpoint: it holds {what}. Checkpoints load with "
                         "weights_only=True, so nothing in a file ever runs; use a checkpoint written by "
                         "x-train (or saved with torch.save of a state_dict)")
    unpickler = re.search(r"WeightsUnpickler error:\s*([^\n]+)", text)  # torch's own words, not its advice
    if unpickler:
        first = unpickler.group(1).strip()
    else:
        first = text.split(". ")[0].strip() if "weights_only" not in text else ""
    reason = f"{type(error).__name__}: {first}" if first else type(error).__name__
    return UserError(f"{path} is not a readable checkpoint: it is truncated, corrupt or not a torch.save "
                     f"file ({reason})")


def load_torch(path: str) -> Any:
    """torch.load with weights_only=True (no code runs on load), from any xdpx.io path. A corrupt,
    truncated or code-carrying file raises a UserError naming the path."""
    import pickle  # lazy: pickle only to word a refused file; x-prepro --dry starts without it

    import torch  # lazy: torch is heavy; x-prepro (and its --dry) starts without it

    with io.open(path, "rb") as f:
        try:
            with warnings.catch_warnings():  # torch warns about pickle protocols of files it then refuses
                warnings.simplefilter("ignore")
                return torch.load(f, map_location="cpu", weights_only=True)
        except (pickle.UnpicklingError, RuntimeError, EOFError, KeyError, ValueError, IndexError, TypeError,
                AttributeError, OSError) as error:
            # torch's zip reader seeks past the end of a truncated file: OSError [Errno 22]. An OSError of
            # the store itself (an outage while reading) is no verdict on the file: it propagates.
            if isinstance(error, OSError) and (isinstance(error, io.StoreUnavailableError) or is_transient(error)):
                raise
            raise _unreadable(path, error) from None


def load_weights(path: str) -> dict[str, Any]:
    """The model state_dict of a weights checkpoint, a full state file, or an alias."""
    obj = load_torch(resolve_checkpoint(path))
    if isinstance(obj, dict) and "model" in obj and isinstance(obj["model"], dict) and "counters" in obj:
        return obj["model"]
    return obj


def renamed_prefixes(weights: dict[str, Any], prefixes: dict[str, str],
                     keep: set[str] | frozenset[str] = frozenset()) -> dict[str, Any]:
    """``weights`` with each key that starts with a prefix of ``prefixes`` (old -> new) renamed; keys in
    ``keep`` stay as they are."""
    out = {}
    for key, value in weights.items():
        if key not in keep:
            old = next((p for p in prefixes if key.startswith(p)), None)
            if old is not None:
                key = prefixes[old] + key[len(old):]
        out[key] = value
    return out


def upgraded(model: Any, weights: dict[str, Any]) -> dict[str, Any]:
    """``weights`` with the keys of an earlier release renamed to the model's (xdpx/models/composed.py)."""
    upgrade = getattr(model, "upgrade_state_dict", None)
    return upgrade(weights) if upgrade is not None else weights


def shape_differences(own: dict[str, Any], saved: dict[str, Any]) -> list[str]:
    """'name (saved shape) vs the model's (shape)' for each weight both have with different shapes."""
    return [f"{k} {tuple(v.shape)} vs the model's {tuple(own[k].shape)}" for k, v in saved.items()
            if k in own and hasattr(v, "shape") and tuple(own[k].shape) != tuple(v.shape)]


def state_mismatch(own: dict[str, Any], saved: dict[str, Any]) -> str | None:
    """Why ``saved`` weights are not this model's (shapes, missing or extra keys), or None."""
    parts = []
    shapes = shape_differences(own, saved)
    if shapes:
        parts.append("shapes differ: " + "; ".join(shapes[:5]))
    missing, unexpected = sorted(set(own) - set(saved)), sorted(set(saved) - set(own))
    if missing:
        parts.append(f"the model has weights the state lacks: {missing[:5]}")
    if unexpected:
        parts.append(f"the state has weights the model lacks: {unexpected[:5]}")
    return "; ".join(parts) or None


def load_weights_into(model: Any, path: str, strict: bool, say: Any = print, hint: str = "") -> None:
    """Load the weights at ``path`` into ``model``: shape mismatches fail; missing/unexpected keys fail
    when ``strict`` (a checkpoint of this very model), else they are listed through ``say`` (pretrained
    weights for another head...). ``hint`` ends the error messages (what to check)."""

    weights = upgraded(model, load_weights(path))
    own = model.state_dict()
    mismatched = shape_differences(own, weights)
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
