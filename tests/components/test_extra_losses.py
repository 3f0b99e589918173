"""focal, ghmc, circle, taylor_ce and cross_entropy's label_smoothing: values against the formulas written
out by hand on fixed logits, and a short real x-train per loss on the committed review sample."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from tests.components.helpers import make_args
from xdpx.cli import run_chain
from xdpx.losses import losses

LOGITS = torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.2, 0.3], [-1.0, 3.0, 0.0], [0.0, 0.0, 0.0]])
TARGET = torch.tensor([0, 2, 1, 1])
# two classes: column 1 - column 0 is the pair's logit of "match"
PAIR_LOGITS = torch.tensor([[0.0, 1.0], [0.5, -0.5], [0.0, 2.0], [1.0, 0.0], [0.2, 0.1]])
PAIR_TARGET = torch.tensor([1, 0, 1, 0, 1])


def compute(name: str, logits: torch.Tensor, target: torch.Tensor, **config: object) -> torch.Tensor:
    config.setdefault("num_classes", logits.size(1) if logits.dim() == 2 else 1)
    return losses.get(name)(make_args(loss=name, **config)).compute(logits, target)


def softmax_of(row: list[float]) -> list[float]:
    exps = [math.exp(v) for v in row]
    return [e / sum(exps) for e in exps]


# ---- label smoothing on cross_entropy ------------------------------------------------------------------------


def test_cross_entropy_label_smoothing_equals_torch_and_the_formula():
    value = compute("cross_entropy", LOGITS, TARGET, label_smoothing=0.2)
    torch.testing.assert_close(value, F.cross_entropy(LOGITS, TARGET, label_smoothing=0.2, reduction="sum"))
    by_hand = 0.0
    for row, t in zip(LOGITS.tolist(), TARGET.tolist()):
        p = softmax_of(row)
        by_hand += -(0.8 * math.log(p[t]) + 0.2 * sum(math.log(q) for q in p) / 3)
    assert value.item() == pytest.approx(by_hand, rel=1e-6)
    # the default stays plain cross-entropy; label_smooth_ce keeps its own default of 0.1
    torch.testing.assert_close(compute("cross_entropy", LOGITS, TARGET), F.cross_entropy(LOGITS, TARGET, reduction="sum"))
    torch.testing.assert_close(compute("label_smooth_ce", LOGITS, TARGET),
                               F.cross_entropy(LOGITS, TARGET, label_smoothing=0.1, reduction="sum"))


# ---- focal ---------------------------------------------------------------------------------------------------


def test_focal_with_gamma_0_and_no_alpha_is_cross_entropy():
    torch.testing.assert_close(compute("focal", LOGITS, TARGET, focal_gamma=0.0),
                               F.cross_entropy(LOGITS, TARGET, reduction="sum"))


def test_focal_value_by_hand_with_gamma_and_alpha():
    alpha = [0.5, 2.0, 1.0]
    value = compute("focal", LOGITS, TARGET, focal_gamma=2.0, focal_alpha=alpha)
    by_hand = 0.0
    for row, t in zip(LOGITS.tolist(), TARGET.tolist()):
        p_t = softmax_of(row)[t]
        by_hand += -alpha[t] * (1 - p_t) ** 2 * math.log(p_t)
    assert value.item() == pytest.approx(by_hand, rel=1e-6)
    assert value.item() < F.cross_entropy(LOGITS, TARGET, reduction="sum").item() * 2  # easy samples weigh less


def test_focal_on_one_sigmoid_logit():
    logits, target = torch.tensor([1.5, -0.5, 0.0]), torch.tensor([1, 0, 1])
    value = compute("focal", logits, target, focal_gamma=1.0, focal_alpha=[0.25, 0.75])
    by_hand = 0.0
    for x, t in zip(logits.tolist(), target.tolist()):
        p = 1 / (1 + math.exp(-x))
        p_t = p if t == 1 else 1 - p
        by_hand += -(0.75 if t == 1 else 0.25) * (1 - p_t) * math.log(p_t)
    assert value.item() == pytest.approx(by_hand, rel=1e-6)


# ---- ghmc ----------------------------------------------------------------------------------------------------


def ghmc_by_hand(logits: list[list[float]], target: list[int], bins: int,
                 counts: list[float] | None = None) -> tuple[float, list[float]]:
    """GHM-C written out: bin every logit by g = |sigmoid(x) - y|, weigh it N / (count * nonempty bins)."""
    cells = []
    for row, t in zip(logits, target):
        for c, x in enumerate(row):
            y = 1.0 if c == t else 0.0
            p = 1 / (1 + math.exp(-x))
            cells.append((x, y, min(int(abs(p - y) * bins), bins - 1)))
    if counts is None:
        counts = [0.0] * bins
        for _, _, b in cells:
            counts[b] += 1
    nonempty = sum(1 for c in counts if c > 0)
    total, width = 0.0, len(logits[0])
    for x, y, b in cells:
        bce = -(y * math.log(1 / (1 + math.exp(-x))) + (1 - y) * math.log(1 - 1 / (1 + math.exp(-x))))
        total += bce * len(cells) / (counts[b] * nonempty) / width
    return total, counts


def test_ghmc_value_by_hand():
    value = compute("ghmc", LOGITS, TARGET, ghm_bins=4)
    by_hand, counts = ghmc_by_hand(LOGITS.tolist(), TARGET.tolist(), 4)
    assert sorted(counts) != [0, 0, 0, 12]  # the logits spread over several bins, so weights differ
    assert value.item() == pytest.approx(by_hand, rel=1e-6)
    # one bin only: every weight is 1, the plain one-vs-rest BCE averaged over classes
    plain = F.binary_cross_entropy_with_logits(LOGITS, F.one_hot(TARGET, 3).float(), reduction="none").mean(1).sum()
    torch.testing.assert_close(compute("ghmc", LOGITS, TARGET, ghm_bins=1), plain)


def test_ghmc_momentum_runs_in_training_only_and_is_saved_state():
    loss = losses.get("ghmc")(make_args(loss="ghmc", ghm_bins=4, ghm_momentum=0.5))
    first = LOGITS.clone().requires_grad_()
    loss.compute(first, TARGET)
    _, counts_1 = ghmc_by_hand(LOGITS.tolist(), TARGET.tolist(), 4)
    assert loss.state_dict()["running_counts"].tolist() == counts_1
    second = (LOGITS * -1).requires_grad_()
    value = loss.compute(second, TARGET)
    _, counts_2 = ghmc_by_hand((LOGITS * -1).tolist(), TARGET.tolist(), 4)
    mixed = [0.5 * a + 0.5 * b for a, b in zip(counts_1, counts_2)]
    by_hand, _ = ghmc_by_hand((LOGITS * -1).tolist(), TARGET.tolist(), 4, counts=mixed)
    assert value.item() == pytest.approx(by_hand, rel=1e-6)
    assert loss.state_dict()["running_counts"].tolist() == mixed
    with torch.no_grad():  # evaluation: the batch's own counts, the running ones untouched
        plain, _ = ghmc_by_hand(LOGITS.tolist(), TARGET.tolist(), 4)
        assert loss.compute(LOGITS, TARGET).item() == pytest.approx(plain, rel=1e-6)
    assert loss.state_dict()["running_counts"].tolist() == mixed
    fresh = losses.get("ghmc")(make_args(loss="ghmc", ghm_bins=4, ghm_momentum=0.5))
    fresh.load_state_dict(loss.state_dict())
    assert fresh.running_counts.tolist() == mixed


# ---- circle --------------------------------------------------------------------------------------------------


def circle_by_hand(logits: list[list[float]], target: list[int], gamma: float, m: float) -> float:
    s = [1 / (1 + math.exp(-(b - a))) for a, b in logits]
    pos = [gamma * -max(0.0, 1 + m - v) * (v - 1 + m) for v, t in zip(s, target) if t == 1]
    neg = [gamma * max(0.0, v + m) * (v - m) for v, t in zip(s, target) if t == 0]
    total = sum(math.log(sum(math.exp(z) for z in side)) for side in (pos, neg) if side)
    return math.log(1 + math.exp(total))


def test_circle_value_by_hand_times_the_batch_size():
    value = compute("circle", PAIR_LOGITS, PAIR_TARGET, circle_scale=4.0, circle_margin=0.25)
    by_hand = circle_by_hand(PAIR_LOGITS.tolist(), PAIR_TARGET.tolist(), 4.0, 0.25)
    assert value.item() == pytest.approx(5 * by_hand, rel=1e-6)
    # one logit is the same pair logit: the same loss
    single = PAIR_LOGITS[:, 1] - PAIR_LOGITS[:, 0]
    assert compute("circle", single, PAIR_TARGET, circle_scale=4.0).item() == pytest.approx(value.item(), rel=1e-6)
    # a batch of positives only keeps the positive term
    only = compute("circle", PAIR_LOGITS[[0, 2]], PAIR_TARGET[[0, 2]], circle_scale=4.0)
    assert only.item() == pytest.approx(2 * circle_by_hand(PAIR_LOGITS[[0, 2]].tolist(), [1, 1], 4.0, 0.25), rel=1e-6)


def test_circle_needs_two_classes():
    from xdpx.config.errors import ConfigError

    with pytest.raises(ConfigError, match="num_classes 2"):
        make_args(loss="circle", num_classes=3)


# ---- taylor_ce -----------------------------------------------------------------------------------------------


def test_taylor_ce_value_by_hand_and_even_order():
    value = compute("taylor_ce", LOGITS, TARGET, taylor_n=4)
    by_hand = 0.0
    for row, t in zip(LOGITS.tolist(), TARGET.tolist()):
        f = [sum(x**i / math.factorial(i) for i in range(5)) for x in row]
        by_hand += -math.log(f[t] / sum(f))
    assert value.item() == pytest.approx(by_hand, rel=1e-6)
    from xdpx.config.errors import ConfigError

    with pytest.raises(ConfigError, match="taylor_n must be even"):
        make_args(loss="taylor_ce", taylor_n=3)


# ---- a short real training per loss --------------------------------------------------------------------------


def train_losses(data_dir: Path, save_dir: Path, **overrides: object) -> list[float]:
    config = {"__parent__": "${data_dir}/meta", "data_dir": str(data_dir), "save_dir": str(save_dir),
              "model": "cls_cnn", "embedding_dim": 16, "num_filters": 8, "kernel_sizes": [2, 3], "dropout": 0.0,
              "batch_size": 16, "learning_rate": 1e-2, "max_epoch": 6, "eval_interval": 15, "log_interval": 5,
              "major_metric": "accuracy", "viz": False, "seed": 1, **overrides}
    path = save_dir.parent / f"{save_dir.name}.hjson"
    path.write_text(json.dumps(config))
    assert run_chain(["x-train", str(path)]) == 0
    lines = (save_dir / "train.log.tsv").read_text().splitlines()
    column = lines[0].split("\t").index("loss")
    return [float(line.split("\t")[column]) for line in lines[1:]]


@pytest.mark.parametrize("loss, options", [
    ("focal", {"focal_gamma": 2.0, "focal_alpha": [1.0, 1.0]}),
    ("ghmc", {"ghm_bins": 10, "ghm_momentum": 0.75}),
    ("circle", {"circle_scale": 16.0}),
    ("taylor_ce", {"taylor_n": 2}),
    ("cross_entropy", {"label_smoothing": 0.1}),
])
def test_training_lowers_the_loss(reviews: Path, tmp_path: Path, loss: str, options: dict[str, object]):
    values = train_losses(reviews, tmp_path / loss, loss=loss, **options)
    assert len(values) == 18 and all(math.isfinite(v) for v in values)
    # the mean of the last three logged intervals is clearly below the first three
    assert sum(values[-3:]) < 0.8 * sum(values[:3]), values


def test_ghmc_running_counts_resume_bit_for_bit(reviews: Path, tmp_path: Path):
    from xdpx.models.checkpoints import load_torch, save_torch

    options = {"loss": "ghmc", "ghm_momentum": 0.75, "resume": True, "max_epoch": 2}
    train_losses(reviews, tmp_path / "whole", **options)
    train_losses(reviews, tmp_path / "staged", **options, train_steps=11)
    state = load_torch(str(tmp_path / "staged" / "state.pt"))
    assert state["counters"]["num_updates"] == 11 and state["loss"]["running_counts"].sum() > 0
    shutil.copytree(tmp_path / "staged", tmp_path / "forgetful")
    train_losses(reviews, tmp_path / "staged", **options)
    whole, staged = (load_torch(str(tmp_path / name / "state.pt"))["model"] for name in ("whole", "staged"))
    assert all(torch.equal(whole[k], staged[k]) for k in whole)
    # the counts matter: a resume without them ends elsewhere
    del state["loss"]
    save_torch(state, str(tmp_path / "forgetful" / "state.pt"))
    train_losses(reviews, tmp_path / "forgetful", **options)
    forgetful = load_torch(str(tmp_path / "forgetful" / "state.pt"))["model"]
    assert not all(torch.equal(whole[k], forgetful[k]) for k in whole)
