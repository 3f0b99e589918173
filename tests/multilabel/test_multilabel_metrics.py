"""Multi-label metrics against scikit-learn on fixed inputs, the multilabel_bce loss against torch's
formula, and the config checks of the loss."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn import metrics as sk

from xdpx.cli import run_chain
from xdpx.metrics.multilabel import multilabel_metrics, thresholds_for


def fixed_inputs() -> tuple[np.ndarray, np.ndarray, list[str]]:
    rng = np.random.default_rng(3)
    targets = (rng.random((50, 4)) < 0.35).astype(np.int64)
    targets[:3] = 0  # samples with no label, and below a label that no sample has
    targets[:, 3] = 0
    logits = rng.normal(size=(50, 4)) + 1.5 * (targets - 0.5)
    return logits, targets, ["a", "b", "c", "d"]


@pytest.mark.parametrize("per_label", [None, {"a": 0.3, "c": 0.7}], ids=["global", "per-label"])
def test_metrics_equal_scikit_learn(per_label):
    logits, targets, labels = fixed_inputs()
    thresholds = thresholds_for(labels, 0.5, per_label)
    got = multilabel_metrics(torch.tensor(logits), torch.tensor(targets, dtype=torch.float32), labels, thresholds)
    predicted = (1 / (1 + np.exp(-logits)) >= thresholds).astype(int)
    assert predicted.sum() and (predicted != targets).any()
    assert got["micro_f1"] == pytest.approx(sk.f1_score(targets, predicted, average="micro", zero_division=0))
    assert got["macro_f1"] == pytest.approx(sk.f1_score(targets, predicted, average="macro", zero_division=0))
    assert got["samples_f1"] == pytest.approx(sk.f1_score(targets, predicted, average="samples", zero_division=1))
    assert got["subset_accuracy"] == pytest.approx(sk.accuracy_score(targets, predicted))
    assert got["hamming_loss"] == pytest.approx(sk.hamming_loss(targets, predicted))
    per_label_f1 = sk.f1_score(targets, predicted, average=None, zero_division=0)
    assert [got[f"f1_{label}"] for label in labels] == pytest.approx(list(per_label_f1))


def test_multilabel_bce_is_the_mean_over_labels_summed_over_samples():
    from xdpx.config.options import Args
    from xdpx.losses.multilabel import MultilabelBCE

    logits, targets, _ = fixed_inputs()
    logits, targets = torch.tensor(logits, dtype=torch.float32), torch.tensor(targets, dtype=torch.float32)
    plain = MultilabelBCE(Args({"pos_weight": None}, {}, set(), {})).compute(logits, targets)
    expected = torch.nn.BCEWithLogitsLoss(reduction="mean")(logits, targets) * len(logits)
    assert torch.allclose(plain, expected)
    weight = [2.0, 1.0, 3.0, 1.0]
    weighted = MultilabelBCE(Args({"pos_weight": weight}, {}, set(), {})).compute(logits, targets)
    reference = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(weight))(logits, targets) * len(logits)
    assert torch.allclose(weighted, reference) and weighted > plain


@pytest.mark.parametrize("overrides,message", [
    ({"loss": "cross_entropy", "major_metric": "accuracy", "decision_threshold": ..., "label_thresholds": ...},
     "target_type: multilabel the loss multilabel_bce"),
    ({"pos_weight": [1.0, 2.0]}, "pos_weight lists one number per label"),
    ({"major_metric": "accuracy"}, "major_metric is not reported with this loss"),
    ({"major_metric": "hamming_loss"}, "hamming_loss is lower-is-better: set ascending_metric: false"),
    ({"decision_threshold": 1.5}, "decision_threshold"),
], ids=["classification-loss", "pos-weight-length", "major-metric", "hamming-direction", "threshold-range"])
def test_config_mistakes_stop_before_work(multilabel_data, tmp_path, capsys, overrides, message):
    from ml_helpers import train_config

    assert run_chain(["x-train", str(train_config(tmp_path, multilabel_data, **overrides)), "--dry"]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
