"""Temperature scaling (Guo et al., 2017): one positive number T that divides a classifier's logits, fitted
on a labelled split by minimising the negative log-likelihood, so that a 0.9 means right 9 times in 10.

Dividing every logit of a sample by the same T keeps their order, so the predicted label (and accuracy,
F1, AUC) never change; only how sure the probabilities say the model is. ``x-script calibrate`` fits T
(:func:`fit_temperature`: L-BFGS on log T, so T stays positive) and keeps it in the run's
calibration.json (xdpx.metrics.calibration); x-eval, x-pred and x-serve divide the logits by it whenever
the record is there and was fitted for the checkpoint they load (:func:`run_temperature`), unless asked
for raw probabilities.

Which runs: single-label classifiers whose predictions are class rows (softmax over C logits, or one
sigmoid logit): text classification and pairs. Not multi-label runs: their label sets come from per-label
decision thresholds on the raw sigmoid probabilities (decision_threshold, label_thresholds tuned by
x-script best_threshold); a per-label temperature would move probabilities across those thresholds and
change the predicted sets, where calibration must leave the predictions as they are. Not NER (per-token
tags decoded to entities), regression or embeddings: they have no class probabilities to calibrate.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from xdpx import io
from xdpx.config.errors import ConfigError
from xdpx.inference.outputs import PredictionFormat, prediction_format, probabilities
from xdpx.metrics.calibration import DEFAULT_BINS, calibration_scores, read_record

# a temperature outside this range is a degenerate fit (e.g. a split the model gets all right: the NLL keeps
# falling as T -> 0), not a calibration
TEMPERATURE_RANGE = (1e-3, 1e3)


def class_probabilities(logits: Any, temperature: float = 1.0) -> np.ndarray:
    """``[N, C]`` probabilities of class logits ``[N, C]`` (softmax) or one logit ``[N]`` (sigmoid), at T."""
    return probabilities(np.asarray(logits, dtype=np.float64) / temperature, regression=False)


def nll_at(logits: Any, targets: Any, temperature: Any) -> Any:
    """Mean negative log-likelihood (a torch scalar) of integer ``targets`` under ``logits / temperature``."""
    import torch  # lazy: x-eval and x-pred read this module's options at start-up

    scaled = logits / temperature
    if scaled.dim() == 1:  # one sigmoid logit: the probability of class 1
        return torch.nn.functional.binary_cross_entropy_with_logits(scaled, targets.to(scaled.dtype))
    return torch.nn.functional.cross_entropy(scaled, targets)


def fit_temperature(logits: Any, targets: Any, max_iter: int = 100) -> float:
    """The T > 0 that minimises the NLL of ``targets`` under ``logits / T`` (may be non-finite or extreme for a
    degenerate split: the caller checks it against :data:`TEMPERATURE_RANGE`)."""
    import torch  # lazy: x-eval and x-pred read this module's options at start-up

    logits = torch.as_tensor(np.asarray(logits), dtype=torch.float64)
    targets = torch.as_tensor(np.asarray(targets), dtype=torch.int64)
    log_t = torch.zeros((), dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS([log_t], lr=0.5, max_iter=max_iter, tolerance_grad=1e-9,
                                  tolerance_change=1e-11, line_search_fn="strong_wolfe")

    def closure() -> Any:
        optimizer.zero_grad()
        loss = nll_at(logits, targets, log_t.exp())
        loss.backward()
        return loss

    optimizer.step(closure)
    return float(log_t.detach().exp())


def check_temperature(temperature: float, split: str, save_dir: str) -> None:
    """A fitted T that is not finite or outside TEMPERATURE_RANGE is refused (ConfigError: exit 2)."""
    low, high = TEMPERATURE_RANGE
    if not math.isfinite(temperature) or not low <= temperature <= high:
        raise ConfigError(f"x-script calibrate {save_dir}: the temperature fitted on {split!r} would be {temperature:.3g} "
                          f"(not finite, or outside {low:g}..{high:g}): the split's predictions are all right (or all "
                          "wrong) with ever more confidence, so it cannot calibrate; use a larger held-out split; "
                          "nothing written")


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with io.open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def calibrates(loaded: Any) -> bool:
    """Whether the run's predictions are class rows that temperature scaling applies to (module docstring)."""
    if loaded.regression or loaded.processor.target_map is None:
        return False
    fmt = prediction_format(loaded.task, None, loaded.processor.target_map.labels, False)
    return isinstance(fmt, PredictionFormat)


def run_temperature(save_dir: str | None, loaded: Any, raw: bool = False,
                    say: Callable[[str], None] = print) -> float | None:
    """The temperature of ``save_dir``'s calibration.json for the checkpoint ``loaded`` holds; None when raw
    probabilities are asked for, there is no record, the run is not a calibrated kind or the record was
    fitted for other weights (said)."""
    if raw or save_dir is None:
        return None
    record = read_record(save_dir)
    if record is None or not calibrates(loaded):
        return None
    checkpoint = loaded.checkpoint
    if checkpoint is None or not io.exists(str(checkpoint)) or file_sha256(str(checkpoint)) != record["checkpoint_sha256"]:
        say(f"calibration: {io.join(save_dir, 'calibration.json')} was fitted for {record['checkpoint']}, not for "
            f"the weights loaded now ({io.basename(str(checkpoint)) if checkpoint else 'none'}): raw probabilities "
            f"(run x-script calibrate {save_dir} --split {record['split']} for these weights)")
        return None
    say(f"calibration: temperature {record['temperature']:.4g} (fitted on {record['split']}); raw probabilities "
        "with calibrated: false (x-serve: --raw-probs)")
    return float(record["temperature"])


def scale_logits(logits: Any, temperature: float | None) -> Any:
    """``logits / temperature`` (a tensor or array; unchanged when temperature is None)."""
    return logits if temperature is None else logits / temperature


def calibration_metrics(logits: Any, targets: Any, temperature: float | None, num_bins: int = DEFAULT_BINS) -> dict[str, Any]:
    """x-eval's columns: ``ece`` and ``brier`` of the raw probabilities and, with a temperature, ``temperature``,
    ``nll``, ``nll_calibrated``, ``ece_calibrated`` and ``brier_calibrated``; ``bins`` / ``bins_calibrated``
    (lists, for the printed reliability line) are popped by the caller."""
    targets = np.asarray(targets, dtype=np.int64)
    raw = calibration_scores(class_probabilities(logits), targets, num_bins)
    out: dict[str, Any] = {"ece": raw["ece"], "brier": raw["brier"], "bins": raw["bins"]}
    if temperature is not None:
        scaled = calibration_scores(class_probabilities(logits, temperature), targets, num_bins)
        out.update({"temperature": temperature, "nll": raw["nll"], "nll_calibrated": scaled["nll"],
                    "ece_calibrated": scaled["ece"], "brier_calibrated": scaled["brier"], "bins_calibrated": scaled["bins"]})
    return out


def bins_line(bins: list[dict[str, Any]]) -> str:
    """The non-empty bins as ``confidence->accuracy (count)`` for a printed line."""
    return ", ".join(f"{b['confidence']:.2f}->{b['accuracy']:.2f} ({b['count']})" for b in bins if b["count"])
