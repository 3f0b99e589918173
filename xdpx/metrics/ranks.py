"""Average ranks (ties share the mean of their positions), for Spearman and AUC without scipy."""

from __future__ import annotations

import numpy as np


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks; equal values get the average of the ranks they span (scipy's 'average')."""
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    # Start of each run of equal values, and the run each sorted position belongs to.
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    ends = np.r_[starts[1:], len(values)]
    run_of = np.repeat(np.arange(len(starts)), ends - starts)
    mean_rank = (starts + ends + 1) / 2.0  # mean of positions start+1 .. end
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = mean_rank[run_of]
    return ranks
