"""A collated batch on the device that runs the model: the training loop and inference move batches alike."""

from __future__ import annotations

from typing import Any


def batch_to_device(batch: dict[str, Any], device: Any) -> dict[str, Any]:
    """A collated batch with its tensors (net_input and target) on ``device``; unchanged on the CPU."""
    if device.type == "cpu":
        return batch
    batch = dict(batch)
    batch["net_input"] = {k: v.to(device, non_blocking=True) for k, v in batch["net_input"].items()}
    if batch.get("target") is not None:
        batch["target"] = batch["target"].to(device, non_blocking=True)
    return batch
