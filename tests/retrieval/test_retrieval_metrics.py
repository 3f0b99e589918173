"""Retrieval metrics on fixed embeddings against hand counts and scipy, and the two bi-encoder losses
against their formulas (in-batch negatives with hard negatives; cosine regression)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from xdpx.config.options import Args
from xdpx.metrics.retrieval import retrieval_metrics


def test_recall_and_mrr_are_the_hand_counts():
    # candidate i is query i's positive; the scores are dot products
    q = np.array([[1, 0], [0.6, 0.8], [1, 1]], dtype=np.float64)
    p = np.array([[1, 0], [0.8, 0.6], [0.5, 0.5]], dtype=np.float64)
    hard = np.array([[-1, 0], [0, 1.01], [-1, 0]], dtype=np.float64)
    # q0: p0 1 > p1 0.8 > p2 0.5: rank 1. q1: p1 0.96 > p2 0.7 > p0 0.6: rank 1.
    # q2: p1 1.4 > p0 1.0 = p2 1.0 (its own; a tie counts against): rank 3.
    got = retrieval_metrics(torch.tensor(np.concatenate([q, p], axis=1)), None, 2, [1, 2, 3])
    assert (got["recall_at_1"], got["recall_at_2"], got["recall_at_3"]) == pytest.approx((2 / 3, 2 / 3, 1.0))
    assert got["mrr"] == pytest.approx((1 + 1 + 1 / 3) / 3)
    # with hard negatives in the pool: q2 also sees hard1 (1.01) above its own: rank 4; q1 sees 0.808 < 0.96
    got = retrieval_metrics(torch.tensor(np.concatenate([q, p, hard], axis=1)), None, 3, [1, 3])
    assert (got["recall_at_1"], got["recall_at_3"]) == pytest.approx((2 / 3, 2 / 3))
    assert got["mrr"] == pytest.approx((1 + 1 + 1 / 4) / 3)


def test_pearson_and_spearman_of_the_cosine_equal_scipy():
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=(40, 6)), rng.normal(size=(40, 6))
    scores = rng.uniform(0, 5, size=40).round(1)  # ties among the scores
    got = retrieval_metrics(torch.tensor(np.concatenate([a, b], 1)), torch.tensor(scores, dtype=torch.float64), 2, [1])
    cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert got["spearman"] == pytest.approx(stats.spearmanr(cosine, scores).statistic)
    assert got["pearson"] == pytest.approx(stats.pearsonr(cosine, scores).statistic)


def test_info_nce_is_cross_entropy_over_in_batch_and_hard_negatives():
    from xdpx.losses.bi_encoder import CosineSimilarity, InfoNCE

    g = torch.Generator().manual_seed(0)
    embeddings = torch.nn.functional.normalize(torch.randn(5, 3, 8, generator=g), dim=-1)
    loss = InfoNCE(Args({"temperature": 0.1, "symmetric": False}, {}, set(), {}))
    q, p, n = embeddings[:, 0], embeddings[:, 1], embeddings[:, 2]
    logits = torch.cat([q @ p.T, q @ n.T], dim=1) / 0.1  # [5, 10]: column i is query i's positive
    by_hand = -(logits.log_softmax(1)[torch.arange(5), torch.arange(5)]).sum()
    assert torch.allclose(loss.scores(embeddings, None), by_hand, atol=1e-5)
    pairs_only = -((q @ p.T / 0.1).log_softmax(1).diagonal()).sum()
    assert torch.allclose(loss.scores(embeddings[:, :2], None), pairs_only, atol=1e-5)
    cosine = CosineSimilarity(Args({"score_scale": 5.0}, {}, set(), {}))
    scores = torch.tensor([5.0, 0.0, 2.5, 4.0, 1.0])
    expected = ((torch.nn.functional.cosine_similarity(q, p) - scores / 5) ** 2).sum()
    assert torch.allclose(cosine.scores(embeddings[:, :2], scores), expected, atol=1e-6)
