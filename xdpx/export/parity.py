"""Parity checks: an exported model must give the eager model's outputs on real inputs.

The inputs are real samples of the run's data (the binary splits x-prepro wrote from real text with
the run's processor), batched by the run's processor into several shapes: one short sample, one long
sample, and batches of mixed lengths, so a model exported with a fixed batch or sequence length, or
one that lets padding leak into its outputs, fails the check.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from xdpx import io
from xdpx.data.dataset import open_split
from xdpx.errors import UserError

PARITY_SPLITS = ("dev", "valid", "test", "train")


class ParityError(Exception):
    """An exported model whose outputs differ from the eager model's beyond the tolerance."""


@dataclass
class ParityReport:
    """What was compared: the shapes of the inputs and the largest absolute difference."""

    shapes: list[tuple[int, ...]]
    max_abs_diff: float

    def describe(self) -> str:
        shapes = ", ".join("x".join(map(str, s)) for s in self.shapes)
        return f"max |difference| {self.max_abs_diff:.3g} over batches of shape {shapes}"


def real_samples(args: Any, count: int = 32, data_dir: str | None = None) -> list[dict[str, Any]]:
    """Up to ``count`` samples of the run's data: its valid_subset, else dev/test/train."""
    data_dir = data_dir or args.data_dir
    if not data_dir or not io.isdir(data_dir):
        raise UserError(f"the parity check encodes real samples of the run's data, but data_dir {data_dir!r} "
                        "does not exist here: set parity_data_dir to the x-prepro output the run used")
    candidates = [args.get("valid_subset")] + list(PARITY_SPLITS)
    for split in [s for s in candidates if isinstance(s, str)]:
        try:
            dataset = open_split(data_dir, split)
        except FileNotFoundError:
            continue
        if len(dataset):
            # Evenly spread over the split, so lengths vary as they do in the data.
            picks = np.linspace(0, len(dataset) - 1, num=min(count, len(dataset))).astype(int)
            return [dataset[int(i)] for i in dict.fromkeys(picks.tolist())]
    raise UserError(f"data_dir {data_dir} holds no samples in {', '.join(PARITY_SPLITS)} for the parity check")


def parity_batches(processor: Any, samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``net_input`` dicts of several shapes: the shortest sample alone, the longest alone, 3 mixed
    samples, and up to 8 (all tensors on the CPU)."""
    def size(s: dict[str, Any]) -> int:
        return sum(len(s[f]) for f in processor.fields)

    ordered = sorted(samples, key=size)
    groups = [ordered[:1], ordered[-1:], samples[:3], samples[3:11] or samples[:8]]
    seen, batches = set(), []
    for group in groups:
        key = tuple(id(s) for s in group)
        if group and key not in seen:
            seen.add(key)
            batches.append(processor.collate(group)["net_input"])
    return batches


def as_numpy(output: Any) -> list[np.ndarray]:
    """Model outputs (a tensor, or a tuple/list/dict of them) as a flat list of float arrays."""
    if isinstance(output, dict):
        output = list(output.values())
    if not isinstance(output, (list, tuple)):
        output = [output]
    arrays = []
    for item in output:
        if hasattr(item, "detach"):
            item = item.detach().float().cpu().numpy()
        arrays.append(np.asarray(item, dtype=np.float32))
    return arrays


def check_parity(eager: Callable[[dict[str, Any]], Any], exported: Callable[[dict[str, Any]], Any],
                 batches: list[dict[str, Any]], what: str, atol: float = 1e-4, rtol: float = 1e-4) -> ParityReport:
    """Run both on every batch; raise :class:`ParityError` naming the batch shape when they differ."""
    import torch  # lazy: loads torch

    worst, shapes = 0.0, []
    for batch in batches:
        shape = tuple(next(iter(batch.values())).shape)
        shapes.append(shape)
        with torch.no_grad():
            expected, actual = as_numpy(eager(batch)), as_numpy(exported(batch))
        if len(expected) != len(actual):
            raise ParityError(f"{what}: {len(actual)} outputs, the eager model gives {len(expected)}")
        for e, a in zip(expected, actual):
            if e.shape != a.shape:
                raise ParityError(f"{what}: output shape {a.shape} on inputs {shape}, eager gives {e.shape}")
            diff = float(np.max(np.abs(e - a))) if e.size else 0.0
            worst = max(worst, diff)
            if not np.allclose(e, a, atol=atol, rtol=rtol):
                raise ParityError(f"{what}: outputs differ from the eager model by up to {diff:.3g} on inputs "
                                  f"of shape {shape} (tolerance atol={atol}, rtol={rtol})")
    return ParityReport(shapes, worst)
