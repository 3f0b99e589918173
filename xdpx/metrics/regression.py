"""Regression metrics: Pearson and Spearman correlation (0 when either side is constant)."""

from __future__ import annotations

import numpy as np

from xdpx.metrics.predictions import Predictions, metric
from xdpx.metrics.ranks import average_ranks


def correlation(x: np.ndarray, y: np.ndarray) -> float:
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt((x * x).sum() * (y * y).sum())
    return float((x * y).sum() / denominator) if denominator > 0 else 0.0


@metric("pearson", "regression")
def pearson(p: Predictions) -> float:
    return correlation(p.scores, p.targets)


@metric("spearman", "regression")
def spearman(p: Predictions) -> float:
    """Pearson correlation of the average ranks (handles ties like scipy.stats.spearmanr)."""
    return correlation(average_ranks(p.scores), average_ranks(p.targets))
