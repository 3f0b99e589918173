"""The soft losses against a hand computation: distill (KL * T^2 + alpha CE), bce_distill, unlabelled rows."""

from __future__ import annotations

import math

import pytest
import torch

from xdpx.config.options import Args
from xdpx.losses import losses

STUDENT = [[1.0, -0.5, 0.25], [0.1, 0.2, -1.3]]
TEACHER = [[2.0, 0.0, -1.0], [-0.4, 1.1, 0.3]]


def softmax(row: list[float], t: float) -> list[float]:
    e = [math.exp(v / t) for v in row]
    return [v / sum(e) for v in e]


def kl(p: list[float], q: list[float]) -> float:
    return sum(a * math.log(a / b) for a, b in zip(p, q))


def loss(name: str, **values: float):
    return losses.get(name)(Args({"temperature": 2.0, "alpha": 0.3, **values}, {}, set(), {}))


def test_distill_is_temperature_scaled_kl_plus_alpha_cross_entropy():
    t, alpha, labels = 2.0, 0.3, [0, 2]
    expected = 0.0
    for s, te, y in zip(STUDENT, TEACHER, labels):
        soft = kl(softmax(te, t), softmax(s, t)) * t * t
        hard = -math.log(softmax(s, 1.0)[y])
        expected += (1 - alpha) * soft + alpha * hard
    got = loss("distill").compute(torch.tensor(STUDENT), torch.tensor(labels), torch.tensor(TEACHER))
    assert got.item() == pytest.approx(expected, rel=1e-6)


def test_a_row_without_label_has_the_soft_part_only_and_no_teacher_means_cross_entropy():
    t, alpha = 2.0, 0.3
    soft = [kl(softmax(te, t), softmax(s, t)) * t * t for s, te in zip(STUDENT, TEACHER)]
    hard1 = -math.log(softmax(STUDENT[1], 1.0)[1])
    got = loss("distill").compute(torch.tensor(STUDENT), torch.tensor([-100, 1]), torch.tensor(TEACHER))
    assert got.item() == pytest.approx((1 - alpha) * (soft[0] + soft[1]) + alpha * hard1, rel=1e-6)
    # evaluation (no teacher logits): the plain cross-entropy of the labelled rows
    assert loss("distill").compute(torch.tensor(STUDENT), torch.tensor([-100, 1])).item() == pytest.approx(hard1, rel=1e-6)


def test_bce_distill_for_a_single_logit_teacher():
    t, alpha = 3.0, 0.5
    student, teacher, labels = [0.7, -1.2], [2.5, -0.3], [1, 0]

    def sigmoid(x: float) -> float:
        return 1 / (1 + math.exp(-x))

    def bce(logit: float, target: float) -> float:
        p = sigmoid(logit)
        return -(target * math.log(p) + (1 - target) * math.log(1 - p))

    expected = sum((1 - alpha) * bce(s / t, sigmoid(te / t)) * t * t + alpha * bce(s, y)
                   for s, te, y in zip(student, teacher, labels))
    got = loss("bce_distill", temperature=t, alpha=alpha).compute(torch.tensor(student), torch.tensor(labels),
                                                                 torch.tensor(teacher))
    assert got.item() == pytest.approx(expected, rel=1e-6)


def test_the_teacher_must_have_the_students_classes():
    with pytest.raises(ValueError, match="same order"):
        loss("distill").compute(torch.tensor(STUDENT), torch.tensor([0, 1]), torch.tensor([[1.0, 2.0]] * 2))
