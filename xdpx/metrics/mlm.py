"""Masked-language-model metrics: mlm_accuracy, mlm_perplexity (and sop_accuracy for bert_pretrain).

The MLM losses keep per-prediction rows instead of vocabulary-wide logits (an evaluation of a few
thousand blocks would otherwise hold gigabytes): ``[N, 3]`` rows of (kind, negative log-likelihood,
correct), kind 0 for a masked token and 1 for a sentence-order prediction. ``mlm_perplexity`` is
lower-is-better: with it as major_metric set ascending_metric: false.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from xdpx.metrics import metrics

MLM_ROW, SOP_ROW = 0, 1


@dataclass
class PredictionRows:
    """(kind, nll, correct) rows of a whole evaluation."""

    rows: np.ndarray

    def of(self, kind: int) -> np.ndarray:
        return self.rows[self.rows[:, 0] == kind]


def _register(name: str, kind: str):  # noqa: ANN202 - a decorator
    def decorator(function):  # noqa: ANN001, ANN202
        function.kind = kind
        return metrics.register(name)(function)

    return decorator


@_register("mlm_accuracy", "mlm")
def mlm_accuracy(p: PredictionRows) -> float:
    """Share of masked tokens whose most likely prediction is the original token."""
    rows = p.of(MLM_ROW)
    return float(rows[:, 2].mean()) if len(rows) else 0.0


@_register("mlm_perplexity", "mlm")
def mlm_perplexity(p: PredictionRows) -> float:
    """exp(mean negative log-likelihood of the masked tokens) (lower is better)."""
    rows = p.of(MLM_ROW)
    return float(math.exp(min(rows[:, 1].mean(), 700.0))) if len(rows) else float("inf")


@_register("sop_accuracy", "sop")
def sop_accuracy(p: PredictionRows) -> float:
    """Share of blocks whose sentence order (kept / swapped) is predicted right (bert_pretrain)."""
    rows = p.of(SOP_ROW)
    return float(rows[:, 2].mean()) if len(rows) else 0.0


def mlm_metrics(rows: np.ndarray, kinds: tuple[str, ...]) -> dict[str, float]:
    """Every registered metric of these kinds on the rows."""
    predictions = PredictionRows(np.asarray(rows, dtype=np.float64).reshape(-1, 3))
    return {name: float(metric(predictions)) for name, metric in metrics.items() if metric.kind in kinds}
