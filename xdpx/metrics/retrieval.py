"""Retrieval and similarity metrics of a bi-encoder, on the embeddings of a whole evaluation.

The dev set is its own candidate pool: query i (its first text) must find its own second text among the
second texts of all dev samples (and the hard negatives, when the data has a third text). ``recall_at_<k>``
is the share of queries whose positive ranks in the top k (ties count against: a candidate with the same
score as the positive ranks before it); ``mrr`` the mean of 1 / rank. With regression targets (STS
scores) also ``pearson`` and ``spearman`` of the cosine similarity of each pair against the score.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from xdpx.metrics.predictions import _numpy
from xdpx.metrics.ranks import average_ranks
from xdpx.metrics.regression import correlation

RETRIEVAL_METRIC_NAMES = ("mrr", "pearson", "spearman")  # plus recall_at_<k> for each k of recall_at


def positive_ranks(queries: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """1-based rank of candidate i for query i among all candidates by dot product (ties rank first)."""
    ranks = np.empty(len(queries), dtype=np.int64)
    for start in range(0, len(queries), 1024):  # blocks of queries: memory stays [1024, candidates]
        block = queries[start: start + 1024]
        scores = block @ candidates.T
        own = scores[np.arange(len(block)), np.arange(start, start + len(block))]
        ranks[start: start + len(block)] = (scores >= own[:, None]).sum(axis=1)  # itself included: rank >= 1
    return ranks


def retrieval_metrics(embeddings: Any, targets: Any, num_texts: int, ks: list[int]) -> dict[str, float]:
    """``embeddings`` ``[N, K * D]`` (the K texts of each sample side by side), ``targets`` ``[N]``."""
    vectors = _numpy(embeddings).astype(np.float64)
    vectors = vectors.reshape(len(vectors), num_texts, -1)
    out: dict[str, float] = {}
    if num_texts >= 2 and len(vectors):
        queries = vectors[:, 0]
        candidates = np.concatenate([vectors[:, 1]] + ([vectors[:, 2]] if num_texts > 2 else []))
        ranks = positive_ranks(queries, candidates)
        for k in ks:
            out[f"recall_at_{k}"] = float((ranks <= k).mean())
        out["mrr"] = float((1.0 / ranks).mean())
        targets = _numpy(targets) if targets is not None else None
        # scores that vary (STS); pairs without a label column get constant zeros: no correlation to report
        if targets is not None and np.issubdtype(targets.dtype, np.floating) and targets.ndim == 1 \
                and len(targets) > 1 and np.ptp(targets) > 0:
            cosine = (queries * vectors[:, 1]).sum(1) / np.maximum(
                np.linalg.norm(queries, axis=1) * np.linalg.norm(vectors[:, 1], axis=1), 1e-12)
            out["pearson"] = correlation(cosine, targets.astype(np.float64))
            out["spearman"] = correlation(average_ranks(cosine), average_ranks(targets.astype(np.float64)))
    return out
