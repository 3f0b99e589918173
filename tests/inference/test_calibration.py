"""Calibration: the temperature fit, ECE and Brier against hand counts (and scikit-learn), x-script calibrate
on a real tiny run, and x-eval / x-pred / x-serve / x-viz with the run's calibration.json (and without it)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from inference_helpers import write_json

from xdpx.cli import run_chain, x_script
from xdpx.inference.calibration import (
    check_temperature,
    class_probabilities,
    fit_temperature,
    run_temperature,
)
from xdpx.metrics.calibration import (
    brier_score,
    calibration_scores,
    expected_calibration_error,
    negative_log_likelihood,
    reliability_bins,
)

# ---- the numbers ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("classes", [1, 4])  # one sigmoid logit, and a softmax over four classes
def test_the_fit_recovers_the_temperature_the_labels_were_drawn_at(classes: int) -> None:
    rng = np.random.default_rng(0)
    true_temperature, n = 2.5, 8000
    if classes == 1:
        logits = rng.normal(0, 4, n)
        targets = (rng.random(n) < 1 / (1 + np.exp(-logits / true_temperature))).astype(np.int64)
    else:
        logits = rng.normal(0, 4, (n, classes))
        p = class_probabilities(logits, true_temperature)
        targets = (rng.random((n, 1)) > p.cumsum(axis=1)).sum(axis=1)  # a draw from each row's distribution
    fitted = fit_temperature(logits, targets)
    assert fitted == pytest.approx(true_temperature, rel=0.08)
    # the fit is the minimum: the NLL is higher a little to either side
    nll = [negative_log_likelihood(class_probabilities(logits, t), targets) for t in (fitted * 0.9, fitted, fitted * 1.1)]
    assert nll[1] < nll[0] and nll[1] < nll[2]


def test_ece_and_brier_are_the_hand_computed_values() -> None:
    probabilities = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4]])
    targets = np.array([0, 1, 1, 1])
    # 5 bins: 0.9 (right) in (0.8, 1]; 0.8 (wrong) and 0.7 (right) in (0.6, 0.8]; 0.6 (wrong) in (0.4, 0.6]
    bins = reliability_bins(probabilities, targets, 5)
    assert [b.count for b in bins] == [0, 0, 1, 2, 1]
    assert bins[3].confidence == pytest.approx(0.75) and bins[3].accuracy == pytest.approx(0.5)
    assert expected_calibration_error(probabilities, targets, 5) == pytest.approx(0.25 * 0.1 + 0.5 * 0.25 + 0.25 * 0.6)
    assert brier_score(probabilities, targets) == pytest.approx((0.01 + 0.64 + 0.09 + 0.36) / 4)
    three = np.array([[0.7, 0.2, 0.1], [0.1, 0.5, 0.4]])
    assert brier_score(three, np.array([0, 2])) == pytest.approx(((0.09 + 0.04 + 0.01) + (0.01 + 0.25 + 0.36)) / 2)
    assert negative_log_likelihood(three, np.array([0, 2])) == pytest.approx(-(np.log(0.7) + np.log(0.4)) / 2)
    scores = calibration_scores(probabilities, targets, 5)
    assert scores["accuracy"] == 0.5 and len(scores["bins"]) == 5
    from xdpx.inference.options import ECE_BINS
    from xdpx.metrics.calibration import DEFAULT_BINS

    assert ECE_BINS.default == DEFAULT_BINS == 15  # x-eval's option and the tools' default agree


def test_brier_agrees_with_scikit_learn() -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(1)
    p1 = rng.random(200)
    y = (rng.random(200) < p1).astype(int)
    assert brier_score(np.stack([1 - p1, p1], axis=1), y) == pytest.approx(metrics.brier_score_loss(y, p1))


def test_a_temperature_that_is_not_finite_is_refused() -> None:
    from xdpx.config.errors import ConfigError

    for bad in (float("nan"), float("inf"), 1e-6, 1e6):
        with pytest.raises(ConfigError, match="nothing written"):
            check_temperature(bad, "dev", "runs/a")
    check_temperature(1.7, "dev", "runs/a")


# ---- on a real run ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def calibrated(cnn_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the tiny cls_cnn run (the shared one stays uncalibrated), calibrated on dev."""
    run = tmp_path_factory.mktemp("calibrated") / "run"
    shutil.copytree(cnn_run, run)
    assert x_script(["calibrate", str(run), "--split", "dev", "--bins", "10"]) == 0
    return run


def read_tsv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def test_calibrate_writes_the_record_and_lowers_the_nll_with_the_same_accuracy(calibrated: Path) -> None:
    record = json.loads((calibrated / "calibration.json").read_text())
    assert record["split"] == "dev" and record["samples"] == 60 and record["num_bins"] == 10
    assert record["checkpoint"].startswith("checkpoint-") and len(record["checkpoint_sha256"]) == 64
    assert 1e-3 < record["temperature"] < 1e3 and record["temperature"] != 1.0
    before, after = record["before"], record["after"]
    assert after["nll"] < before["nll"]
    assert after["accuracy"] == before["accuracy"]
    assert sum(b["count"] for b in after["bins"]) == 60 and len(after["bins"]) == 10
    written = json.loads((calibrated / ".xdpx-written").read_text())
    assert written["files"]["calibration.json"] == "calibrate"


def test_calibrating_again_replaces_its_own_record(calibrated: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(calibrated, run)
    assert x_script(["calibrate", str(run), "--split", "train", "--bins", "5"]) == 0
    assert json.loads((run / "calibration.json").read_text())["split"] == "train"


def eval_rows(run: Path, tmp_path: Path, name: str, **extra: object) -> dict[str, str]:
    out = tmp_path / f"{name}.tsv"
    config = write_json(tmp_path / f"{name}.hjson", {"save_dir": str(run), "valid_subset": "dev", "cuda": False,
                                                     "save_to_file": str(out), "save_mode": "w", **extra})
    assert run_chain(["x-eval", str(config)]) == 0
    return read_tsv(out)[0]


def test_x_eval_reports_ece_and_brier_raw_and_calibrated(calibrated: Path, cnn_run: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    record = json.loads((calibrated / "calibration.json").read_text())
    row = eval_rows(calibrated, tmp_path, "calibrated", ece_bins=10)
    assert float(row["temperature"]) == pytest.approx(record["temperature"], rel=1e-5)
    # the same split, bins and temperature as the record's figures
    assert float(row["ece"]) == pytest.approx(record["before"]["ece"], abs=1e-6)
    assert float(row["ece_calibrated"]) == pytest.approx(record["after"]["ece"], abs=1e-6)
    assert float(row["brier_calibrated"]) == pytest.approx(record["after"]["brier"], abs=1e-6)
    assert float(row["nll_calibrated"]) < float(row["nll"])
    out = capsys.readouterr().out
    assert "x-eval dev reliability (10 bins" in out and "x-eval dev reliability calibrated (10 bins" in out
    raw = eval_rows(calibrated, tmp_path, "raw", calibrated=False, ece_bins=10)
    assert "ece_calibrated" not in raw and "temperature" not in raw
    assert raw["accuracy"] == row["accuracy"] and raw["ece"] == row["ece"]
    # every classifier gets ECE and Brier, calibrated or not
    plain = eval_rows(cnn_run, tmp_path, "plain")
    assert 0 <= float(plain["ece"]) <= 1 and 0 <= float(plain["brier"]) <= 1 and "temperature" not in plain


def predict(run: Path, tmp_path: Path, name: str, **extra: object) -> list[dict[str, str]]:
    out = tmp_path / f"{name}.tsv"
    config = write_json(tmp_path / f"{name}.hjson", {"save_dir": str(run), "predict_file_map": {"dev": str(out)},
                                                     "cuda": False, **extra})
    assert run_chain(["x-pred", str(config)]) == 0
    return read_tsv(out)


def test_x_pred_writes_calibrated_probabilities_and_raw_ones_on_request(calibrated: Path, tmp_path: Path) -> None:
    temperature = json.loads((calibrated / "calibration.json").read_text())["temperature"]
    scaled, raw = predict(calibrated, tmp_path, "scaled"), predict(calibrated, tmp_path, "raw", calibrated=False)
    logits = predict(calibrated, tmp_path, "logits", distill=True)  # distill: always the raw logits
    labels = [k[len("prob_"):] for k in scaled[0] if k.startswith("prob_")]
    assert [r["predict"] for r in scaled] == [r["predict"] for r in raw]
    z = np.array([[float(r[f"logit_{label}"]) for label in labels] for r in logits])
    p_scaled = np.array([[float(r[f"prob_{label}"]) for label in labels] for r in scaled])
    p_raw = np.array([[float(r[f"prob_{label}"]) for label in labels] for r in raw])
    np.testing.assert_allclose(p_scaled, class_probabilities(z, temperature), atol=2e-6)
    np.testing.assert_allclose(p_raw, class_probabilities(z), atol=2e-6)
    assert np.abs(p_scaled - p_raw).max() > 1e-6  # T != 1: they differ


def test_x_serve_answers_calibrated_probabilities_unless_raw(calibrated: Path) -> None:
    from xdpx.serve.predictor import load_predictor

    temperature = json.loads((calibrated / "calibration.json").read_text())["temperature"]
    served, raw = load_predictor(str(calibrated), cpu=True), load_predictor(str(calibrated), cpu=True, raw_probs=True)
    assert served.temperature == pytest.approx(temperature) and raw.temperature is None
    assert served.describe()["temperature"] == pytest.approx(temperature)
    a, b = served.predict_inputs(["这个酒店很好，下次还来"])[0], raw.predict_inputs(["这个酒店很好，下次还来"])[0]
    assert a["label"] == b["label"]

    def log_odds(answer: dict) -> float:
        p = answer["probabilities"]
        return float(np.log(p["pos"] / p["neg"]))

    assert log_odds(a) == pytest.approx(log_odds(b) / temperature, rel=1e-4)  # the logits divided by T


def test_a_record_of_other_weights_is_not_applied(calibrated: Path, tmp_path: Path) -> None:
    from xdpx.serve.predictor import load_predictor

    run = tmp_path / "run"
    shutil.copytree(calibrated, run)
    record = json.loads((run / "calibration.json").read_text())
    (run / "calibration.json").write_text(json.dumps({**record, "checkpoint_sha256": "0" * 64}))
    said: list[str] = []
    predictor = load_predictor(str(run), cpu=True)
    assert run_temperature(str(run), predictor.loaded, say=said.append) is None
    assert "was fitted for" in said[0] and "raw probabilities" in said[0]


def test_x_viz_draws_the_reliability_diagram(calibrated: Path, tmp_path: Path) -> None:
    from PIL import Image

    run = tmp_path / "run"
    shutil.copytree(calibrated, run)
    assert run_chain(["x-viz", str(write_json(tmp_path / "viz.hjson", {"save_dir": str(run)}))]) == 0
    image = np.asarray(Image.open(run / "plots" / "reliability.png").convert("L"))
    assert image.shape[0] > 400 and image.std() > 10  # drawn, not blank


# ---- bad input: one line, exit 2, nothing written ---------------------------------------------------------------


def test_bad_splits_are_refused_and_nothing_is_written(cnn_run: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    shutil.copytree(cnn_run, run)
    assert x_script(["calibrate", str(run), "--split", "nope"]) == 2
    assert "'nope' is neither a split of the run's data_dir" in capsys.readouterr().err
    unlabelled = tmp_path / "unlabelled.txt"
    unlabelled.write_text("这个酒店很好\n服务太差了\n", encoding="utf-8")
    assert x_script(["calibrate", str(run), "--split", str(unlabelled)]) == 2
    assert "has no labels" in capsys.readouterr().err
    one = tmp_path / "one.txt"  # one sample: the NLL keeps falling (or rising) with T, no finite optimum
    one.write_text("这个酒店很好\tpos\n", encoding="utf-8")
    assert x_script(["calibrate", str(run), "--split", str(one)]) == 2
    assert "would be" in capsys.readouterr().err
    assert x_script(["calibrate", str(run), "--bins", "0"]) == 2
    assert not (run / "calibration.json").exists()
