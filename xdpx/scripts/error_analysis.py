"""The numbers of x-script errors, from a split's probabilities and gold labels (no model, no files): the most
confident mistakes, the most confused label pairs, and per-label precision, recall, F1 and support."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Mistake:
    """A wrong prediction: the sample's position in the split, its text, gold and predicted labels, the
    probability of the predicted label (how sure the model was) and of the gold one."""

    index: int
    text: str
    gold: str
    predicted: str
    probability: float
    gold_probability: float


@dataclass(frozen=True)
class ConfusedPair:
    """``count`` samples of ``gold`` predicted as ``predicted``; ``share``: of all samples of ``gold``."""

    gold: str
    predicted: str
    count: int
    share: float


@dataclass(frozen=True)
class LabelScores:
    label: str
    precision: float
    recall: float
    f1: float
    support: int  # samples whose gold label this is
    predicted: int  # samples predicted as this label


def most_confident_mistakes(probabilities: np.ndarray, targets: np.ndarray, texts: list[str], labels: list[str],
                            top: int) -> list[Mistake]:
    """The ``top`` wrong predictions with the highest probability of the predicted label (ties: split order)."""
    predicted = probabilities.argmax(axis=1)
    wrong = np.flatnonzero(predicted != targets)
    confidence = probabilities[wrong, predicted[wrong]]
    order = wrong[np.argsort(-confidence, kind="stable")][:top]
    return [Mistake(int(i), texts[i], labels[targets[i]], labels[predicted[i]], float(probabilities[i, predicted[i]]),
                    float(probabilities[i, targets[i]])) for i in order]


def confusion_counts(predicted: np.ndarray, targets: np.ndarray, num_labels: int) -> np.ndarray:
    """``counts[gold, predicted]``."""
    counts = np.zeros((num_labels, num_labels), dtype=np.int64)
    np.add.at(counts, (targets, predicted), 1)
    return counts


def confused_pairs(counts: np.ndarray, labels: list[str], top: int) -> list[ConfusedPair]:
    """The off-diagonal cells with samples, most first (ties: gold then predicted in label order)."""
    support = counts.sum(axis=1)
    cells = [(int(counts[g, p]), g, p) for g in range(len(labels)) for p in range(len(labels))
             if g != p and counts[g, p]]
    cells.sort(key=lambda cell: (-cell[0], cell[1], cell[2]))
    return [ConfusedPair(labels[g], labels[p], count, count / support[g]) for count, g, p in cells[:top]]


def per_label_scores(counts: np.ndarray, labels: list[str]) -> list[LabelScores]:
    """Precision, recall and F1 of each label (a zero denominator counts 0, as scikit-learn's zero_division=0)."""
    scores = []
    for k, label in enumerate(labels):
        right, support, predicted = int(counts[k, k]), int(counts[k, :].sum()), int(counts[:, k].sum())
        precision = right / predicted if predicted else 0.0
        recall = right / support if support else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        scores.append(LabelScores(label, precision, recall, f1, support, predicted))
    return scores
