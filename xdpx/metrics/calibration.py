"""Calibration of class probabilities: expected calibration error (ECE) with its reliability bins, the Brier
score and the negative log-likelihood, and the record a run keeps of its fitted temperature.

ECE (Guo et al., 2017): the samples are put in ``num_bins`` equal-width bins by their confidence (the
probability of the predicted class; bin ``m`` holds ``(m-1)/M < confidence <= m/M``, the first one also
0); ECE is the sum over bins of ``count / N * |accuracy - mean confidence|``. Brier score: for two
classes the mean of ``(p_1 - y)^2`` over samples (scikit-learn's ``brier_score_loss``), for more the
mean over samples of ``sum_k (p_k - y_k)^2`` (scikit-learn's multi-class form). Both read ``[N, C]``
probabilities and ``[N]`` integer targets.

The record (``calibration.json`` in a run directory, written by ``x-script calibrate``) holds the
temperature that divides the logits, the split it was fitted on, the checkpoint it was fitted for (file
name and SHA-256: a temperature is only valid for those weights), and NLL, ECE, Brier and the bins before
and after. :func:`read_record` checks it; x-eval, x-pred, x-serve and x-viz read it through it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from xdpx import io
from xdpx.errors import UserError

CALIBRATION_FILE = "calibration.json"
DEFAULT_BINS = 15


@dataclass(frozen=True)
class ReliabilityBin:
    """One confidence bin: its edges, how many samples fall in it, their mean confidence and accuracy."""

    lower: float
    upper: float
    count: int
    confidence: float
    accuracy: float

    def as_dict(self) -> dict[str, Any]:
        return {"lower": self.lower, "upper": self.upper, "count": self.count, "confidence": self.confidence,
                "accuracy": self.accuracy}


def reliability_bins(probabilities: np.ndarray, targets: np.ndarray, num_bins: int = DEFAULT_BINS) -> list[ReliabilityBin]:
    """The ``num_bins`` equal-width confidence bins of these predictions (empty bins included, count 0)."""
    probabilities, targets = np.asarray(probabilities, dtype=np.float64), np.asarray(targets)
    confidence = probabilities.max(axis=1)
    correct = (probabilities.argmax(axis=1) == targets).astype(np.float64)
    # bin m holds (m-1)/M < c <= m/M: ceil(c * M) - 1, with confidence 0 in the first bin
    index = np.clip(np.ceil(confidence * num_bins).astype(np.int64) - 1, 0, num_bins - 1)
    bins = []
    for m in range(num_bins):
        inside = index == m
        count = int(inside.sum())
        bins.append(ReliabilityBin(m / num_bins, (m + 1) / num_bins, count,
                                   float(confidence[inside].mean()) if count else 0.0,
                                   float(correct[inside].mean()) if count else 0.0))
    return bins


def expected_calibration_error(probabilities: np.ndarray, targets: np.ndarray, num_bins: int = DEFAULT_BINS) -> float:
    """ECE over ``num_bins`` equal-width confidence bins (0: confidence matches accuracy in every bin)."""
    bins = reliability_bins(probabilities, targets, num_bins)
    total = sum(b.count for b in bins)
    if not total:
        return 0.0
    return float(sum(b.count / total * abs(b.accuracy - b.confidence) for b in bins))


def brier_score(probabilities: np.ndarray, targets: np.ndarray) -> float:
    """Two classes: mean ``(p_1 - y)^2``; more: mean ``sum_k (p_k - y_k)^2`` (as scikit-learn's)."""
    probabilities, targets = np.asarray(probabilities, dtype=np.float64), np.asarray(targets, dtype=np.int64)
    if not len(targets):
        return 0.0
    if probabilities.shape[1] == 2:
        return float(np.mean((probabilities[:, 1] - targets) ** 2))
    one_hot = np.zeros_like(probabilities)
    one_hot[np.arange(len(targets)), targets] = 1.0
    return float(np.mean(((probabilities - one_hot) ** 2).sum(axis=1)))


def negative_log_likelihood(probabilities: np.ndarray, targets: np.ndarray) -> float:
    """Mean ``-log p_target`` (natural log; a probability of 0 counts as the smallest positive float)."""
    probabilities, targets = np.asarray(probabilities, dtype=np.float64), np.asarray(targets, dtype=np.int64)
    if not len(targets):
        return 0.0
    chosen = probabilities[np.arange(len(targets)), targets]
    return float(-np.log(np.maximum(chosen, np.finfo(np.float64).tiny)).mean())


def calibration_scores(probabilities: np.ndarray, targets: np.ndarray, num_bins: int = DEFAULT_BINS) -> dict[str, Any]:
    """``nll``, ``ece``, ``brier``, ``accuracy`` and the ``bins`` (as dicts) of these predictions."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    targets = np.asarray(targets, dtype=np.int64)
    accuracy = float((probabilities.argmax(axis=1) == targets).mean()) if len(targets) else 0.0
    return {"nll": negative_log_likelihood(probabilities, targets),
            "ece": expected_calibration_error(probabilities, targets, num_bins),
            "brier": brier_score(probabilities, targets), "accuracy": accuracy,
            "bins": [b.as_dict() for b in reliability_bins(probabilities, targets, num_bins)]}


# ---- the record in the run directory --------------------------------------------------------------------------

_NUMBER_KEYS = ("temperature",)
_TEXT_KEYS = ("split", "checkpoint", "checkpoint_sha256")


def read_record(save_dir: str) -> dict[str, Any] | None:
    """The run's calibration record (None when it has none); a record that is not one is a UserError."""
    path = io.join(save_dir, CALIBRATION_FILE)
    if not io.exists(path):
        return None
    try:
        with io.open(path) as f:
            record = json.load(f)
    except ValueError as e:
        raise UserError(f"{path} is not JSON ({e}): run x-script calibrate {save_dir} --split dev again, or "
                        "remove the file") from None
    missing = [k for k in _NUMBER_KEYS + _TEXT_KEYS if not isinstance(record, dict) or k not in record]
    if missing:
        raise UserError(f"{path} lacks {', '.join(missing)}: run x-script calibrate {save_dir} --split dev again")
    temperature = record["temperature"]
    if not isinstance(temperature, (int, float)) or not math.isfinite(temperature) or temperature <= 0:
        raise UserError(f"{path}: temperature {temperature!r} is not a positive finite number: run x-script "
                        f"calibrate {save_dir} again")
    return record
