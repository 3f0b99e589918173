"""The evaluation x-train and x-eval share, and batched prediction for x-pred and x-serve.

:func:`evaluate` is the only code that turns a model and a dataset into loss and metrics: the trainer's
evaluation (valid.log.tsv) calls it and so does x-eval, so the same checkpoint on the same split gives
the same numbers in both. Batches are cut from the samples sorted by length (stable), collated by the
run's processor and run through ``task.valid_step`` under the run's autocast context; the metrics come
from ``task.compute_metrics`` on the concatenated outputs of the whole evaluation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch


def _identity(batch: dict[str, Any]) -> dict[str, Any]:
    return batch


def length_order(sizes: Any) -> np.ndarray:
    """Sample indices by length (ties in their order): little padding in each batch."""
    return np.argsort(np.asarray(sizes), kind="stable")


def evaluate(task: Any, model: torch.nn.Module, processor: Any, data: Any, batch_size: int, autocast: Any,
             to_device: Callable[[dict[str, Any]], dict[str, Any]] = _identity,
             max_steps: int | None = None) -> dict[str, float]:
    """``{'loss': ..., metric: ...}`` of ``model`` on ``data`` (``len``, ``[i]``, ``sizes``; labelled).

    Sets ``model.eval()``; the caller restores training mode if it needs it. ``max_steps`` stops after
    that many batches (of the length-sorted order, so the shortest samples).
    """
    model.eval()
    loss_sum, sample_size, logits, targets = 0.0, 0, [], []
    order = length_order(data.sizes)
    for step, start in enumerate(range(0, len(order), batch_size)):
        if max_steps is not None and step >= max_steps:
            break
        batch = processor.collate([data[int(j)] for j in order[start: start + batch_size]])
        with autocast:
            _loss, size, logs = task.valid_step(model, to_device(batch))
        loss_sum += float(logs["loss"])
        sample_size += size
        logits.append(logs["logits"].float().cpu())
        targets.append(logs["target"].cpu())
    metrics = {"loss": loss_sum / max(sample_size, 1)}
    metrics.update(task.compute_metrics(torch.cat(logits), torch.cat(targets)))
    return metrics


def predict_logits(task: Any, model: torch.nn.Module, processor: Any, samples: Sequence[dict[str, Any]],
                   batch_size: int, autocast: Any,
                   to_device: Callable[[dict[str, Any]], dict[str, Any]] = _identity) -> torch.Tensor:
    """Logits (float32, on the CPU) of ``samples`` in their given order, computed in length-sorted batches."""
    if not samples:
        return torch.zeros(0)
    fields = processor.fields
    order = length_order([sum(len(s[f]) for f in fields) for s in samples])
    outputs = []
    model.eval()
    with torch.inference_mode():  # no autograd bookkeeping at all: the outputs only become numbers
        for start in range(0, len(order), batch_size):
            batch = processor.collate([samples[int(j)] for j in order[start: start + batch_size]])
            with autocast:
                outputs.append(task.inference_step(model, to_device(batch)).float().cpu())
    sorted_logits = torch.cat(outputs)
    logits = torch.empty_like(sorted_logits)
    logits[torch.from_numpy(order)] = sorted_logits
    return logits
