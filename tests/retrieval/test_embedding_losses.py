"""The embedding losses (cosent, angle, triplet, contrastive, margin_mse, the Matryoshka option) on tiny
batches against values computed by hand with plain Python math, and the metrics of each Matryoshka width."""

from __future__ import annotations

import math

import pytest
import torch

from xdpx.config.options import Args
from xdpx.errors import UserError
from xdpx.losses.bi_encoder import CosineSimilarity, InfoNCE
from xdpx.losses.distances import Contrastive, Triplet
from xdpx.losses.margin_mse import MarginMSE
from xdpx.losses.matryoshka import over_widths
from xdpx.losses.pair_scores import AnglE, CoSENT


def args(**values: object) -> Args:
    return Args(dict(values), {}, set(), {})


def cos(u: list[float], v: list[float]) -> float:
    dot = sum(x * y for x, y in zip(u, v))
    return dot / math.sqrt(sum(x * x for x in u)) / math.sqrt(sum(y * y for y in v))


# three scored pairs: cosines 0.6, 1/sqrt(2), 0; scores 5, 3, 1
A = [[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]]
B = [[3.0, 4.0], [1.0, 1.0], [0.0, 2.0]]
SCORES = [5.0, 3.0, 1.0]


def pairs() -> torch.Tensor:
    return torch.tensor([[a, b] for a, b in zip(A, B)])


def test_cosent_is_the_log_of_one_plus_the_ordered_exponentials():
    c = [cos(a, b) for a, b in zip(A, B)]
    scale = 2.0
    # pairs (i, j) with s_i > s_j: (0, 1), (0, 2), (1, 2)
    by_hand = math.log(1 + math.exp(scale * (c[1] - c[0])) + math.exp(scale * (c[2] - c[0]))
                       + math.exp(scale * (c[2] - c[1])))
    assert by_hand == pytest.approx(1.02360, abs=1e-5)  # ln(1 + 1.23887 + 0.30119 + 0.24312)
    got = CoSENT(args(scale=scale)).scores(pairs(), torch.tensor(SCORES))
    assert got.item() == pytest.approx(3 * by_hand, rel=1e-6)  # the batch value times its size (sum convention)
    # equal scores are no pair: with scores 5, 5, 1 only (0, 2) and (1, 2) count
    tied = math.log(1 + math.exp(scale * (c[2] - c[0])) + math.exp(scale * (c[2] - c[1])))
    got = CoSENT(args(scale=scale)).scores(pairs(), torch.tensor([5.0, 5.0, 1.0]))
    assert got.item() == pytest.approx(3 * tied, rel=1e-6)


def test_angle_ranks_by_the_normalised_complex_quotient():
    # each 2-d vector is one complex number re + i im; angle similarity = |Re + Im of (a / b) * |b| / |a||
    def angle(u: list[float], v: list[float]) -> float:
        zu, zv = complex(*u), complex(*v)
        q = zu / zv * abs(zv) / abs(zu)
        return abs(q.real + q.imag)

    assert angle([1, 0], [3, 4]) == pytest.approx(0.2)  # (3 - 4i) / 5
    s = [angle(a, b) for a, b in zip(A, B)]  # 0.2, 0, 1
    scale, angle_scale = 2.0, 3.0
    angle_part = math.log(1 + math.exp(angle_scale * (s[1] - s[0])) + math.exp(angle_scale * (s[2] - s[0]))
                          + math.exp(angle_scale * (s[2] - s[1])))
    c = [cos(a, b) for a, b in zip(A, B)]
    cosent_part = math.log(1 + math.exp(scale * (c[1] - c[0])) + math.exp(scale * (c[2] - c[0]))
                           + math.exp(scale * (c[2] - c[1])))
    loss = AnglE(args(scale=scale, angle_scale=angle_scale, cosent_weight=0.5, angle_weight=2.0))
    got = loss.scores(pairs(), torch.tensor(SCORES))
    assert got.item() == pytest.approx(3 * (0.5 * cosent_part + 2.0 * angle_part), rel=1e-6)
    alone = AnglE(args(scale=scale, angle_scale=angle_scale, cosent_weight=0.0, angle_weight=1.0))
    assert alone.scores(pairs(), torch.tensor(SCORES)).item() == pytest.approx(3 * angle_part, rel=1e-6)
    with pytest.raises(ValueError, match="its width must be even, got 3"):
        alone.scores(torch.ones(3, 2, 3), torch.tensor(SCORES))


def test_triplet_is_the_hinge_of_the_two_distances():
    anchor, positive, negative = [[1.0, 0.0], [0.0, 1.0]], [[1.0, 1.0], [0.0, 2.0]], [[0.0, 1.0], [1.0, 0.0]]
    embeddings = torch.tensor([[a, p, n] for a, p, n in zip(anchor, positive, negative)])

    def euclid(u: list[float], v: list[float]) -> float:
        return math.dist(u, v)

    # euclidean, margin 1: sample 0: d(a,p) = 1, d(a,n) = sqrt 2: 1 - 1.414 + 1 = 0.586;
    # sample 1: d(a,p) = 1, d(a,n) = sqrt 2: 0.586 too
    by_hand = sum(max(euclid(a, p) - euclid(a, n) + 1.0, 0.0) for a, p, n in zip(anchor, positive, negative))
    assert by_hand == pytest.approx(2 * (2 - math.sqrt(2)))
    got = Triplet(args(distance="euclidean", margin=1.0)).scores(embeddings, None)
    assert got.item() == pytest.approx(by_hand, rel=1e-6)
    # cosine, margin 0.5: sample 0: (1 - 0.7071) - (1 - 0) + 0.5 = -0.2071 -> 0; sample 1: 0 - 1 + 0.5 -> 0
    # margin 1.5: 0.7929 and 0.5
    by_hand = sum(max((1 - cos(a, p)) - (1 - cos(a, n)) + 1.5, 0.0) for a, p, n in zip(anchor, positive, negative))
    assert by_hand == pytest.approx(1.5 - 1 / math.sqrt(2) + 0.5)
    assert Triplet(args(distance="cosine", margin=0.5)).scores(embeddings, None).item() == 0.0
    got = Triplet(args(distance="cosine", margin=1.5)).scores(embeddings, None)
    assert got.item() == pytest.approx(by_hand, rel=1e-6)


def test_contrastive_pulls_similar_pairs_and_pushes_dissimilar_ones_within_the_margin():
    u, v = [[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]], [[1.0, 1.0], [3.0, 4.0], [-1.0, 0.0]]
    labels = [1.0, 0.0, 0.0]
    embeddings = torch.tensor([[a, b] for a, b in zip(u, v)])
    # cosine distances 0.2929, 0.4, 2; margin 0.5: 0.5 * 0.2929^2 + 0.5 * (0.5 - 0.4)^2 + 0 (2 > margin)
    d = [1 - cos(a, b) for a, b in zip(u, v)]
    by_hand = 0.5 * d[0] ** 2 + 0.5 * (0.5 - d[1]) ** 2
    assert by_hand == pytest.approx(0.5 * (1 - 1 / math.sqrt(2)) ** 2 + 0.005)
    got = Contrastive(args(distance="cosine", margin=0.5)).scores(embeddings, torch.tensor(labels))
    assert got.item() == pytest.approx(by_hand, rel=1e-6)
    # euclidean distances 1, sqrt(20), 2; margin 3: 0.5 * 1 + 0 + 0.5 * (3 - 2)^2
    got = Contrastive(args(distance="euclidean", margin=3.0)).scores(embeddings, torch.tensor(labels))
    assert got.item() == pytest.approx(1.0, rel=1e-6)
    with pytest.raises(UserError, match=r"labels 1 \(similar\) or 0 \(dissimilar\), got 4.25"):
        Contrastive(args(distance="cosine", margin=0.5)).scores(embeddings, torch.tensor([1.0, 4.25, 0.0]))


def test_margin_mse_regresses_the_dot_product_margin_onto_the_teachers():
    q, p, n = [[1.0, 2.0], [0.0, 1.0]], [[3.0, 0.0], [2.0, 2.0]], [[0.0, 1.0], [1.0, -1.0]]
    embeddings = torch.tensor([[a, b, c] for a, b, c in zip(q, p, n)])

    def dot(u: list[float], v: list[float]) -> float:
        return sum(x * y for x, y in zip(u, v))

    student = [dot(a, b) - dot(a, c) for a, b, c in zip(q, p, n)]  # 3 - 2 = 1; 2 - (-1) = 3
    assert student == [1.0, 3.0]
    loss = MarginMSE(args(similarity="dot"))
    scores = torch.tensor([[5.0, 3.0], [1.0, 2.5]])  # the teacher's (q, p) and (q, n) scores: margins 2, -1.5
    by_hand = (1 - 2) ** 2 + (3 - (-1.5)) ** 2  # 1 + 20.25
    assert loss.margin_loss(embeddings, scores).item() == pytest.approx(by_hand)
    assert loss.margin_loss(embeddings, torch.tensor([[2.0], [-1.5]])).item() == pytest.approx(by_hand)
    cosine = MarginMSE(args(similarity="cosine"))
    by_hand = sum((cos(a, b) - cos(a, c) - m) ** 2 for a, b, c, m in zip(q, p, n, [0.5, 0.0]))
    assert cosine.margin_loss(embeddings, torch.tensor([[0.5], [0.0]])).item() == pytest.approx(by_hand, rel=1e-6)
    with pytest.raises(ValueError, match="got \\(3,\\): set num_logits 1 or 2"):
        loss.margin_loss(embeddings, torch.zeros(2, 3))


def test_matryoshka_sums_the_weighted_losses_of_each_width():
    u = [[1.0, 0.0, 0.0, 2.0], [0.0, 1.0, 1.0, 0.0]]
    v = [[1.0, 1.0, 3.0, 0.0], [0.0, 2.0, 0.0, -1.0]]
    scores = [5.0, 0.0]
    embeddings = torch.tensor([[a, b] for a, b in zip(u, v)])

    def cosine_loss(width: int) -> float:
        return sum((cos(a[:width], b[:width]) - s / 5) ** 2 for a, b, s in zip(u, v, scores))

    # width 2: cosines 1/sqrt(2) (score 1) and 1 (score 0)
    by_hand = 1.0 * cosine_loss(4) + 0.25 * cosine_loss(2)
    assert cosine_loss(2) == pytest.approx((1 / math.sqrt(2) - 1) ** 2 + 1)
    loss = CosineSimilarity(args(score_scale=5.0, matryoshka_dims=[4, 2], matryoshka_weights=[1.0, 0.25]))
    got = over_widths(lambda e: loss.scores(e, torch.tensor(scores)), embeddings, loss.args)
    assert got.item() == pytest.approx(by_hand, rel=1e-6)
    plain = CosineSimilarity(args(score_scale=5.0))
    assert over_widths(lambda e: plain.scores(e, torch.tensor(scores)), embeddings, plain.args).item() == \
        pytest.approx(cosine_loss(4), rel=1e-6)
    with pytest.raises(ValueError, match="width 8 is wider than the embeddings \\(4\\)"):
        over_widths(lambda e: loss.scores(e, torch.tensor(scores)), embeddings, args(matryoshka_dims=[8]))


def test_each_matryoshka_width_reports_its_own_retrieval_metrics():
    # full width (dot products): q0 . p0 = 2 > q0 . p1 = 1; q1 . p1 = 1 > q1 . p0 = 0.1: both rank 1.
    # cut to 2 and normalised: q0 [1, 0], q1 [0, 1], p0 [0, 1], p1 [1, 1] / sqrt 2:
    # q0 . p0 = 0 < q0 . p1 = 0.707 -> rank 2; q1 . p1 = 0.707 < q1 . p0 = 1 -> rank 2
    queries = [[1.0, 0.0, 2.0], [0.0, 1.0, 0.0]]
    positives = [[0.0, 0.1, 1.0], [1.0, 1.0, 0.0]]
    embeddings = torch.tensor([q + p for q, p in zip(queries, positives)])
    loss = InfoNCE(args(temperature=0.05, symmetric=False, recall_at=[1], loader="pair", matryoshka_dims=[2]))
    got = loss.compute_metrics(embeddings, None)
    assert got["recall_at_1"] == 1.0 and got["mrr"] == 1.0
    assert got["recall_at_1@2"] == 0.0 and got["mrr@2"] == pytest.approx(0.5)
