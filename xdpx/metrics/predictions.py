"""Predictions of a whole evaluation in the form metrics need (numpy float64, computed once)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from xdpx.metrics import metrics

MetricFunction = Callable[["Predictions"], float]


def metric(name: str, kind: str) -> Callable[[MetricFunction], MetricFunction]:
    """Register ``function(predictions) -> float`` as metric ``name`` of the family ``kind``."""

    def decorator(function: MetricFunction) -> MetricFunction:
        function.kind = kind  # type: ignore[attr-defined]
        return metrics.register(name)(function)

    return decorator


def _numpy(values: Any) -> np.ndarray:
    if hasattr(values, "detach"):  # a torch tensor (bf16 has no numpy dtype: go through float32)
        values = values.detach().float().cpu().numpy() if values.is_floating_point() else values.cpu().numpy()
    return np.asarray(values)


@dataclass
class Predictions:
    """``scores``: regression values ``[N]``, or class probabilities ``[N, C]``; ``targets``: ``[N]``.

    ``negative_class`` (class 0 when meta.hjson has special_targets) is left out of macro/micro averages.
    """

    scores: np.ndarray
    targets: np.ndarray
    regression: bool
    negative_class: int | None = None

    @classmethod
    def from_outputs(cls, logits: Any, targets: Any, args: Any) -> Predictions:
        logits, targets = _numpy(logits).astype(np.float64), _numpy(targets)
        if np.issubdtype(targets.dtype, np.floating):
            return cls(logits.reshape(-1), targets.astype(np.float64), regression=True)
        if logits.ndim == 1:  # one sigmoid logit: the probabilities of classes 0 and 1
            positive = 1.0 / (1.0 + np.exp(-logits))
            probabilities = np.stack([1.0 - positive, positive], axis=1)
        else:
            shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
            probabilities = shifted / shifted.sum(axis=1, keepdims=True)
        negative = 0 if args.get("special_targets") else None
        return cls(probabilities, targets.astype(np.int64), regression=False, negative_class=negative)

    @property
    def kinds(self) -> tuple[str, ...]:
        if self.regression:
            return ("regression",)
        return ("classification", "binary") if self.num_classes == 2 else ("classification",)

    @property
    def num_classes(self) -> int:
        return int(self.scores.shape[1])

    @cached_property
    def labels(self) -> np.ndarray:
        """The predicted class of each sample."""
        return self.scores.argmax(axis=1)

    @cached_property
    def confusion(self) -> np.ndarray:
        """``confusion[true, predicted]`` counts."""
        counts = np.zeros((self.num_classes, self.num_classes), dtype=np.int64)
        np.add.at(counts, (self.targets, self.labels), 1)
        return counts

    @property
    def averaged_classes(self) -> np.ndarray:
        classes = np.arange(self.num_classes)
        return classes[classes != self.negative_class]
