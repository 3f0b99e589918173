"""Retrieval metrics of more queries than one block (1,024) of positive_ranks: a loop over the queries,
written here with scipy's ranks, gives every query's rank; the metrics of 2,500 queries (three blocks, the
last one partial) must equal its."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from xdpx.metrics.retrieval import positive_ranks, retrieval_metrics

QUERIES = 2500


def loop_ranks(queries: np.ndarray, candidates: np.ndarray) -> list[int]:
    """Query i's positive is candidate i; its rank among all candidates by descending score, ties counting
    against (scipy's "max" rank: a candidate scoring the same ranks before it)."""
    return [int(stats.rankdata(-(candidates @ query), method="max")[i]) for i, query in enumerate(queries)]


def test_metrics_over_several_blocks_of_queries_equal_a_plain_loop():
    rng = np.random.default_rng(7)
    # small integer vectors: exact dot products, many ties; the positive near its query, so ranks spread
    queries = rng.integers(-3, 4, size=(QUERIES, 4)).astype(np.float64)
    positives = queries + rng.integers(-2, 3, size=(QUERIES, 4))
    hard_negatives = rng.integers(-3, 4, size=(QUERIES, 4)).astype(np.float64)
    texts = [queries, positives, hard_negatives]
    candidates = np.concatenate(texts[1:])
    expected = np.asarray(loop_ranks(queries, candidates))
    assert len(set(expected[:1024])) > 10 and expected[1024:].min() == 1 and expected[2048:].max() > 1

    assert positive_ranks(queries, candidates).tolist() == expected.tolist()
    got = retrieval_metrics(torch.tensor(np.concatenate(texts, axis=1)), None, 3, [1, 10, 100])
    for k in (1, 10, 100):
        assert got[f"recall_at_{k}"] == pytest.approx(float(np.mean(expected <= k)), abs=1e-12)
    assert got["mrr"] == pytest.approx(float(np.mean(1.0 / expected)), abs=1e-12)
