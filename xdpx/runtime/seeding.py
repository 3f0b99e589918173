"""Random-number state: derived seeds (invariant 5 of docs/architecture.md) and the capture of every generator.

Init comes from ``seed``; the data order from (seed, epoch) (xdpx/train/batching.py); step randomness
such as dropout from (seed, num_updates): :func:`seed_step` reseeds torch before each update, so an
update's randomness does not depend on what ran before it (an evaluation, a resume, a redone update).
The generators are still saved in the training state, for code that draws from them in between.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def derived_seed(*parts: int) -> int:
    """A 63-bit seed mixed from integers (numpy's SeedSequence: no arithmetic collisions)."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(2, np.uint32).astype(np.uint64)
               .dot(np.array([1 << 31, 1], dtype=np.uint64)))


def epoch_rng(seed: int, epoch: int, salt: int = 0) -> np.random.Generator:
    """The generator of one epoch's draws (the data order, xdpx/train/batching.py; x-viz replays it)."""
    return np.random.default_rng([seed, epoch, salt])


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (1 << 32))
    torch.manual_seed(seed)


def seed_step(seed: int | None, num_updates: int) -> None:
    if seed is not None:
        torch.manual_seed(derived_seed(seed, num_updates, 7))


def rng_state() -> dict[str, Any]:
    """Every generator's state in types that torch.load(weights_only=True) accepts."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": [version, list(internal), gauss],
        "numpy": [kind, torch.from_numpy(np.asarray(keys, dtype=np.int64)), int(pos), int(has_gauss),
                  float(cached)],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])
