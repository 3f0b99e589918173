"""The default task: model and loss from the config; a step is a forward pass and the summed loss."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xdpx.losses import losses
from xdpx.metrics import compute_metrics
from xdpx.models.composed import build_model
from xdpx.tasks import tasks


@tasks.register("default")
class Task:
    """Builds the model (``model``, or ``encoder`` + ``head``) and the loss (``loss``); the trainer owns everything else
    (autocast, backward, normalisation by the update's sample size, optimizer and scaler steps)."""

    options: list[Any] = []

    def __init__(self, args: Any) -> None:
        self.args = args
        self.loss = losses.get(args.loss)(args)

    def build_model(self) -> nn.Module:
        """A fresh model (the trainer seeds the RNGs first, and loads pretrained_model afterwards)."""
        return build_model(self.args)

    def train_step(self, model: nn.Module, batch: dict[str, Any]) -> tuple[torch.Tensor, int, dict[str, Any]]:
        """Forward and loss on one micro-batch: ``(loss_sum, sample_size, logs)``, loss_sum with its graph.

        Call it inside the trainer's autocast context with ``model.train()``; backward is the trainer's.
        """
        return self.loss(model, batch)

    @torch.no_grad()
    def valid_step(self, model: nn.Module, batch: dict[str, Any]) -> tuple[torch.Tensor, int, dict[str, Any]]:
        """Like train_step without gradients; logs also hold ``logits`` and ``target`` for the metrics.

        The caller sets ``model.eval()``.
        """
        return self.loss(model, batch, keep_outputs=True)

    @torch.no_grad()
    def inference_step(self, model: nn.Module, batch: dict[str, Any]) -> torch.Tensor:
        """Logits for a batch without targets (x-pred, x-serve)."""
        return model(**batch["net_input"])

    def prediction_format(self, args: Any, labels: list[str] | None) -> Any:
        """How x-pred / x-serve write predictions: the loss's own format when its outputs are not class
        rows (multilabel_bce: label sets; the bi-encoder losses: embeddings), else None (the classic
        columns of xdpx/inference/outputs.py)."""
        fmt = getattr(self.loss, "prediction_format", None)
        return fmt(args, labels) if callable(fmt) else None

    def compute_metrics(self, logits: torch.Tensor, targets: torch.Tensor) -> dict[str, float]:
        """Metrics of a whole evaluation from its concatenated logits and targets (xdpx.metrics)."""
        if hasattr(self.loss, "compute_metrics"):  # losses whose outputs are not class logits (MLM)
            return self.loss.compute_metrics(logits, targets)
        return compute_metrics(logits, targets, self.args)
