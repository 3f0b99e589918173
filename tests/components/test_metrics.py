"""Metrics against values computed by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.components.helpers import make_args
from xdpx.metrics import compute_metrics, metric_names
from xdpx.metrics.ranks import average_ranks


def one_hot_logits(labels: list[int], num_classes: int) -> torch.Tensor:
    return torch.nn.functional.one_hot(torch.tensor(labels), num_classes).float() * 5


def test_multiclass_accuracy_macro_and_micro():
    targets = torch.tensor([0, 0, 1, 1, 2, 2])
    predicted = [0, 1, 1, 1, 2, 0]
    m = compute_metrics(one_hot_logits(predicted, 3), targets, make_args())
    assert m["accuracy"] == pytest.approx(4 / 6)
    # per class (precision, recall): 0: (1/2, 1/2), 1: (2/3, 1), 2: (1, 1/2)
    f1s = [0.5, 2 * (2 / 3) / (5 / 3), 2 * 0.5 / 1.5]
    assert m["macro_precision"] == pytest.approx((1 / 2 + 2 / 3 + 1) / 3)
    assert m["macro_recall"] == pytest.approx((1 / 2 + 1 + 1 / 2) / 3)
    assert m["macro_f1"] == pytest.approx(sum(f1s) / 3)
    assert m["micro_f1"] == pytest.approx(4 / 6)  # without a negative class micro = accuracy
    assert "f1" not in m and "auc" not in m


def test_first_special_target_is_left_out_of_the_averages():
    targets = torch.tensor([0, 0, 1, 1, 2, 2])
    predicted = [0, 1, 1, 1, 2, 0]
    m = compute_metrics(one_hot_logits(predicted, 3), targets, make_args(special_targets=["none"]))
    # classes 1 and 2: TP = 2 + 1, predicted as 1 or 2: 3 + 1, truly 1 or 2: 4
    assert m["micro_precision"] == pytest.approx(3 / 4)
    assert m["micro_recall"] == pytest.approx(3 / 4)
    assert m["macro_precision"] == pytest.approx((2 / 3 + 1) / 2)
    assert m["accuracy"] == pytest.approx(4 / 6)


def test_binary_precision_recall_f1_auc_of_class_one():
    targets = torch.tensor([1, 1, 0, 0, 1])
    logits = torch.tensor([[0.0, 2.0], [0.0, -1.0], [0.0, -1.0], [0.0, 3.0], [0.0, 0.5]])
    m = compute_metrics(logits, targets, make_args(num_classes=2))
    # predicted positive: samples 0, 3, 4 (TP 2, FP 1); positives: 0, 1, 4 (FN 1)
    assert m["precision"] == pytest.approx(2 / 3) and m["recall"] == pytest.approx(2 / 3)
    assert m["f1"] == pytest.approx(2 / 3)
    # positive vs negative score pairs: (2>-1)=1 (2<3)=0 (-1=-1)=.5 (-1<3)=0 (.5>-1)=1 (.5<3)=0
    assert m["auc"] == pytest.approx(2.5 / 6)


def test_single_sigmoid_logit_is_binary():
    m = compute_metrics(torch.tensor([2.0, -1.0, 0.3, -0.2]), torch.tensor([1, 0, 0, 0]), make_args(num_classes=1))
    assert m["accuracy"] == pytest.approx(3 / 4) and m["precision"] == pytest.approx(1 / 2)
    assert m["recall"] == 1.0 and m["auc"] == 1.0


def test_zero_denominators_count_as_zero_and_auc_of_one_class_is_chance():
    m = compute_metrics(one_hot_logits([0, 0], 2), torch.tensor([0, 0]), make_args(num_classes=2))
    assert m["precision"] == 0.0 and m["f1"] == 0.0 and m["auc"] == 0.5


def test_pearson_and_spearman_with_ties():
    predictions, targets = torch.tensor([1.0, 2.0, 2.0, 3.0]), torch.tensor([1.0, 3.0, 2.0, 4.0])
    m = compute_metrics(predictions, targets, make_args())
    assert set(m) == {"pearson", "spearman"}
    # ranks (1, 2.5, 2.5, 4) and (1, 3, 2, 4): covariance 4.5, variances 4.5 and 5
    assert m["spearman"] == pytest.approx(4.5 / np.sqrt(4.5 * 5))
    x, y = predictions.numpy() - 2.0, targets.numpy() - 2.5
    assert m["pearson"] == pytest.approx((x * y).sum() / np.sqrt((x * x).sum() * (y * y).sum()))
    assert compute_metrics(torch.ones(3), torch.tensor([1.0, 2.0, 3.0]), make_args())["pearson"] == 0.0


def test_average_ranks_share_ties():
    assert average_ranks(np.array([3.0, 1.0, 3.0, 2.0, 3.0])).tolist() == [4.0, 1.0, 4.0, 2.0, 4.0]


def test_metric_names_by_family():
    assert metric_names(("regression",)) == ["pearson", "spearman"]
    assert set(metric_names(("binary",))) == {"precision", "recall", "f1", "auc"}
