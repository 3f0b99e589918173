"""The Loss base class: forward the model on a batch, sum the loss, say what to normalise by."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xdpx.config.options import Rule
from xdpx.metrics import metric_names


def major_metric_rule(kinds: tuple[str, ...], listing: str) -> Rule:
    """Check at config time that major_metric is one this loss's evaluation reports (or 'loss')."""

    def check(args: Any) -> bool:
        kinds_here = set(kinds)
        if "classification" in kinds_here and args.get("num_classes") in (1, 2):
            kinds_here.add("binary")
        return args.major_metric == "loss" or args.major_metric in metric_names(tuple(kinds_here))

    return Rule(check, f"major_metric is not reported with this loss; choose 'loss' or one of: {listing}",
                keys=("major_metric", "loss"))


def target_type_rule(regression: bool) -> Rule:
    """Regression losses need real-valued targets and classification losses class ids (meta's target_type)."""
    if regression:
        return Rule(lambda a: a.target_type == "regression",
                    "this loss fits real values: it needs target_type: regression (use mse there, "
                    "and a classification loss otherwise)", keys=("loss", "target_type"))
    return Rule(lambda a: a.target_type not in ("regression", "multilabel"),
                "target_type: regression needs a regression loss (mse), target_type: multilabel the loss "
                "multilabel_bce", keys=("loss", "target_type"))


def step_logs(loss_sum: torch.Tensor, nsamples: int, sample_size: int,
              outputs: tuple[torch.Tensor, torch.Tensor] | None = None) -> dict[str, Any]:
    """The logs every loss returns with its sum: the detached ``loss``, ``nsamples`` and ``sample_size``, and
    with ``outputs`` (given under ``keep_outputs``) the ``logits`` and ``target`` that the metrics read."""
    logs: dict[str, Any] = {"loss": loss_sum.detach(), "nsamples": nsamples, "sample_size": sample_size}
    if outputs is not None:
        logs["logits"], logs["target"] = outputs
    return logs


class Loss:
    """Base of the losses. Subclasses implement :meth:`compute` on logits and targets.

    ``kinds`` names the metric families that evaluation reports for this loss (xdpx.metrics).
    """

    options: list[Any] = []
    kinds: tuple[str, ...] = ("classification",)

    def __init__(self, args: Any) -> None:
        self.args = args

    def compute(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The loss summed over the batch (a scalar tensor)."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """What the loss carries from one training batch to the next (saved in state.pt); most carry nothing."""
        return {}

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        """Take back what :meth:`state_dict` returned (None: a state saved before losses had one)."""

    def sample_size(self, target: torch.Tensor) -> int:
        """What the summed loss is normalised by: here the number of samples."""
        return int(target.size(0))

    def __call__(self, model: nn.Module, batch: dict[str, Any],
                 keep_outputs: bool = False) -> tuple[torch.Tensor, int, dict[str, Any]]:
        """Forward ``batch['net_input']`` and score it against ``batch['target']``.

        logs: ``loss`` (the detached sum), ``nsamples`` and ``sample_size``; with ``keep_outputs`` also
        the detached ``logits`` and the ``target`` for metrics.
        """
        target = batch["target"]
        logits = model(**batch["net_input"])
        loss_sum = self.compute(logits, target)
        sample_size = self.sample_size(target)
        outputs = (logits.detach(), target) if keep_outputs else None
        return loss_sum, sample_size, step_logs(loss_sum, int(target.size(0)), sample_size, outputs)


def loss_state(task: Any) -> dict[str, Any]:
    """What the task's loss carries between batches, for state.pt (empty for a task without a ``loss`` or a
    loss of a user's own that keeps no state)."""
    state_dict = getattr(getattr(task, "loss", None), "state_dict", None)
    return state_dict() if callable(state_dict) else {}


def restore_loss_state(task: Any, state: dict[str, Any] | None) -> None:
    """Give the task's loss back what :func:`loss_state` saved (None: a state.pt from before losses had one)."""
    load_state_dict = getattr(getattr(task, "loss", None), "load_state_dict", None)
    if callable(load_state_dict) and state is not None:
        load_state_dict(state)
