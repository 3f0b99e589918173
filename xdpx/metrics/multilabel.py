"""Multi-label metrics: a sample has a set of labels, predicted as every label whose sigmoid probability
reaches its decision threshold.

Computed on ``MultilabelPredictions`` (probabilities and multi-hot targets ``[N, C]``) and reported by the
``multilabel`` task: micro_f1 (counts pooled over all labels and samples), macro_f1 (the mean of the
per-label F1), samples_f1 (the mean over samples of each sample's F1), subset_accuracy (the whole set
right), hamming_loss (the share of wrong sample-label cells, lower is better), and per label
``f1_<label>`` (reported, not selectable as major_metric since the names depend on the data). A ratio
with a zero denominator counts as 0, as scikit-learn's ``zero_division=0``; a sample with no true and no
predicted label has samples-F1 1 (nothing to find, nothing claimed wrongly), as scikit-learn gives.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from xdpx.metrics import metrics
from xdpx.metrics.predictions import _numpy, metric

MULTILABEL_METRIC_NAMES = ("micro_f1", "macro_f1", "samples_f1", "subset_accuracy", "hamming_loss")
LOWER_IS_BETTER = ("hamming_loss",)  # as major_metric it needs ascending_metric: false


def sigmoid(logits: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.asarray(logits, dtype=np.float64)))


def thresholds_for(labels: list[str], default: float, per_label: dict[str, float] | None) -> np.ndarray:
    """The decision threshold of each label: ``per_label[label]`` where given, else ``default``."""
    per_label = per_label or {}
    return np.array([float(per_label.get(label, default)) for label in labels], dtype=np.float64)


@dataclass
class MultilabelPredictions:
    """``probabilities`` and 0/1 ``targets`` ``[N, C]``; ``thresholds`` ``[C]`` make the decisions."""

    probabilities: np.ndarray
    targets: np.ndarray
    thresholds: np.ndarray

    @classmethod
    def from_outputs(cls, logits: Any, targets: Any, thresholds: np.ndarray) -> MultilabelPredictions:
        return cls(sigmoid(_numpy(logits)), _numpy(targets).astype(np.int64), thresholds)

    @cached_property
    def predicted(self) -> np.ndarray:
        """0/1 ``[N, C]``: a label is predicted when its probability is at least its threshold."""
        return (self.probabilities >= self.thresholds[None, :]).astype(np.int64)

    @cached_property
    def counts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per label: true positives, false positives, false negatives."""
        truth, predicted = self.targets, self.predicted
        return ((truth & predicted).sum(0), ((1 - truth) & predicted).sum(0), (truth & (1 - predicted)).sum(0))


def _f1(tp: Any, fp: Any, fn: Any) -> np.ndarray:
    """F1 = 2 tp / (2 tp + fp + fn), elementwise, 0 where the denominator is 0."""
    tp, fp, fn = (np.asarray(x, dtype=np.float64) for x in (tp, fp, fn))
    denominator = 2 * tp + fp + fn
    return np.divide(2 * tp, denominator, out=np.zeros_like(denominator), where=denominator > 0)


def multilabel_micro_f1(p: MultilabelPredictions) -> float:
    tp, fp, fn = (c.sum() for c in p.counts)
    return float(_f1(tp, fp, fn))


def multilabel_macro_f1(p: MultilabelPredictions) -> float:
    return float(_f1(*p.counts).mean()) if p.targets.shape[1] else 0.0


@metric("samples_f1", "multilabel")
def samples_f1(p: MultilabelPredictions) -> float:
    truth, predicted = p.targets, p.predicted
    tp = (truth & predicted).sum(1)
    fp, fn = ((1 - truth) & predicted).sum(1), (truth & (1 - predicted)).sum(1)
    per_sample = _f1(tp, fp, fn)
    per_sample[(tp + fp + fn) == 0] = 1.0
    return float(per_sample.mean()) if len(per_sample) else 0.0


@metric("subset_accuracy", "multilabel")
def subset_accuracy(p: MultilabelPredictions) -> float:
    return float((p.targets == p.predicted).all(1).mean()) if len(p.targets) else 0.0


@metric("hamming_loss", "multilabel")
def hamming_loss(p: MultilabelPredictions) -> float:
    return float((p.targets != p.predicted).mean()) if p.targets.size else 0.0


def multilabel_metrics(logits: Any, targets: Any, labels: list[str], thresholds: np.ndarray) -> dict[str, float]:
    """Every multilabel metric, then ``f1_<label>`` per label, for a whole evaluation."""
    predictions = MultilabelPredictions.from_outputs(logits, targets, thresholds)
    # micro_f1 and macro_f1 share their names with the single-label metrics (registered there); the others
    # are registered here as the multilabel family.
    out = {"micro_f1": multilabel_micro_f1(predictions), "macro_f1": multilabel_macro_f1(predictions)}
    out.update((name, float(function(predictions))) for name, function in metrics.items()
               if function.kind == "multilabel")
    for label, value in zip(labels, _f1(*predictions.counts)):
        out[f"f1_{label}"] = float(value)
    return out
