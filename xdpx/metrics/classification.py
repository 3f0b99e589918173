"""Classification metrics: accuracy; precision, recall, F1 (binary, macro, micro); AUC.

A ratio with a zero denominator (no sample predicted as a class, say) counts as 0, as in scikit-learn.
"""

from __future__ import annotations

import numpy as np

from xdpx.metrics.predictions import Predictions, metric
from xdpx.metrics.ranks import average_ranks


def _ratio(numerator: float, denominator: float) -> float:
    return float(numerator) / denominator if denominator else 0.0


def _f1(precision: float, recall: float) -> float:
    return _ratio(2 * precision * recall, precision + recall)


def _class_scores(p: Predictions, cls: int) -> tuple[float, float, float]:
    true_positive = p.confusion[cls, cls]
    precision = _ratio(true_positive, p.confusion[:, cls].sum())
    recall = _ratio(true_positive, p.confusion[cls, :].sum())
    return precision, recall, _f1(precision, recall)


def _micro(p: Predictions) -> tuple[float, float, float]:
    """Counts pooled over the averaged classes; without a negative class this equals accuracy."""
    classes = p.averaged_classes
    true_positive = p.confusion[classes, classes].sum()
    precision = _ratio(true_positive, p.confusion[:, classes].sum())
    recall = _ratio(true_positive, p.confusion[classes, :].sum())
    return precision, recall, _f1(precision, recall)


def _macro(p: Predictions, index: int) -> float:
    """The unweighted mean over the averaged classes of one of (precision, recall, f1)."""
    return float(np.mean([_class_scores(p, int(c))[index] for c in p.averaged_classes]))


@metric("accuracy", "classification")
def accuracy(p: Predictions) -> float:
    return float((p.labels == p.targets).mean()) if len(p.targets) else 0.0


@metric("macro_precision", "classification")
def macro_precision(p: Predictions) -> float:
    return _macro(p, 0)


@metric("macro_recall", "classification")
def macro_recall(p: Predictions) -> float:
    return _macro(p, 1)


@metric("macro_f1", "classification")
def macro_f1(p: Predictions) -> float:
    """The mean of the per-class F1 scores (not the F1 of the mean precision and recall)."""
    return _macro(p, 2)


@metric("micro_precision", "classification")
def micro_precision(p: Predictions) -> float:
    return _micro(p)[0]


@metric("micro_recall", "classification")
def micro_recall(p: Predictions) -> float:
    return _micro(p)[1]


@metric("micro_f1", "classification")
def micro_f1(p: Predictions) -> float:
    return _micro(p)[2]


@metric("precision", "binary")
def precision(p: Predictions) -> float:
    """Of the samples predicted as class 1 (the positive class), the fraction that are."""
    return _class_scores(p, 1)[0]


@metric("recall", "binary")
def recall(p: Predictions) -> float:
    return _class_scores(p, 1)[1]


@metric("f1", "binary")
def f1(p: Predictions) -> float:
    return _class_scores(p, 1)[2]


@metric("auc", "binary")
def auc(p: Predictions) -> float:
    """Area under the ROC curve of the class-1 probability (Mann-Whitney U; ties count one half).

    0.5 when the split holds a single class, where the curve is undefined.
    """
    positive = p.targets == 1
    num_positive, num_negative = int(positive.sum()), int((~positive).sum())
    if num_positive == 0 or num_negative == 0:
        return 0.5
    ranks = average_ranks(p.scores[:, 1])
    u = ranks[positive].sum() - num_positive * (num_positive + 1) / 2
    return float(u / (num_positive * num_negative))
