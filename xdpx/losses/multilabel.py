"""multilabel_bce: one sigmoid per label against multi-hot targets (target_type: multilabel)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from xdpx import io
from xdpx.config.options import Option, Rule
from xdpx.config.ranges import above, in_range
from xdpx.data.processing import TARGET_MAP_FILE
from xdpx.data.targets import TargetMap
from xdpx.errors import UserError
from xdpx.losses import losses
from xdpx.losses.base import Loss
from xdpx.metrics.multilabel import MULTILABEL_METRIC_NAMES, multilabel_metrics, sigmoid, thresholds_for

MULTILABEL_METRICS = "micro_f1, macro_f1, samples_f1, subset_accuracy, hamming_loss (ascending_metric: false)"


def _major_metric_ok(args: Any) -> bool:
    return args.major_metric == "loss" or args.major_metric in MULTILABEL_METRIC_NAMES


@losses.register("multilabel_bce")
class MultilabelBCE(Loss):
    """Binary cross-entropy of each label's logit ``[B, C]`` against the multi-hot targets ``[B, C]``,
    averaged over the labels of a sample and summed over the batch (so the lr does not depend on how many
    labels the data has)."""

    kinds = ("multilabel",)
    options = [
        Option("pos_weight", float | list[float] | None, default=None, validate=above(0),
               doc="weight of the positive term of each label's loss (torch's BCEWithLogitsLoss pos_weight): "
                   "> 1 favours recall of rare labels, e.g. (negatives / positives) of a label in train. One "
                   "number for every label, or a list in target_map.txt order; null: 1"),
        Option("decision_threshold", float, default=0.5, validate=in_range(0, 1),
               doc="a label is predicted when its sigmoid probability is at least this (metrics, x-pred, "
                   "x-serve); tune it on dev with x-script best_threshold"),
        Option("label_thresholds", dict[str, float], default=None, validate=in_range(0, 1),
               doc="per-label decision thresholds {label: threshold} (x-script best_threshold prints them); "
                   "labels not listed use decision_threshold"),
        Rule(lambda a: a.target_type == "multilabel", "loss multilabel_bce needs target_type: multilabel (the "
             "data's label sets; x-prepro writes it to meta.hjson)", keys=("loss", "target_type")),
        Rule(lambda a: not isinstance(a.get("pos_weight"), list) or a.get("num_classes") is None
             or len(a.pos_weight) == a.num_classes,
             "pos_weight lists one number per label: its length must be num_classes (the lines of "
             "target_map.txt)", keys=("pos_weight", "num_classes")),
        Rule(_major_metric_ok, f"major_metric is not reported with this loss; choose 'loss' or one of: "
             f"{MULTILABEL_METRICS}", keys=("major_metric", "loss")),
        Rule(lambda a: a.major_metric != "hamming_loss" or not a.ascending_metric,
             "hamming_loss is lower-is-better: set ascending_metric: false", keys=("major_metric", "ascending_metric")),
    ]

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        weight = args.get("pos_weight")
        self.pos_weight = None if weight is None else torch.tensor(weight, dtype=torch.float32)

    def compute(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        logits = logits.float()  # float32 even under autocast: a bf16 sum over a batch loses digits
        weight = None if self.pos_weight is None else self.pos_weight.to(logits.device)
        per_cell = F.binary_cross_entropy_with_logits(logits, target.float(), pos_weight=weight, reduction="none")
        return per_cell.mean(dim=1).sum()

    # ---- evaluation: the decisions and the metrics of a whole split ----------------------------------
    def labels(self, num_labels: int) -> list[str]:
        """The label names in target-map order: the run directory's target_map.txt, else the data_dir's."""
        for folder in (self.args.get("save_dir"), self.args.get("data_dir")):
            path = io.join(folder, TARGET_MAP_FILE) if folder else None
            if path and io.exists(path):
                labels = TargetMap.load(path).labels
                if len(labels) == num_labels:
                    return labels
        return [f"label{k}" for k in range(num_labels)]

    def thresholds(self, labels: list[str]) -> Any:
        unknown = sorted(set(self.args.get("label_thresholds") or {}) - set(labels))
        if unknown:
            raise UserError(f"label_thresholds names {unknown}, which are not labels of this run ({labels[:10]}): "
                            "fix the names (they are the lines of target_map.txt)")
        return thresholds_for(labels, self.args.decision_threshold, self.args.get("label_thresholds"))

    def compute_metrics(self, logits: torch.Tensor, targets: torch.Tensor) -> dict[str, float]:
        labels = self.labels(int(logits.shape[1]))
        return multilabel_metrics(logits, targets, labels, self.thresholds(labels))

    def prediction_format(self, args: Any, labels: list[str] | None) -> MultilabelFormat:
        """x-pred / x-serve: the predicted label set and every label's probability (see MultilabelFormat)."""
        labels = list(labels) if labels else self.labels(int(self.args.num_classes))
        distill = bool(args.get("distill")) if args is not None else False
        return MultilabelFormat(labels, self.thresholds(labels), self.args.get("label_separator") or "|", distill)


def _number(x: float) -> str:
    return f"{float(x):.7g}"


class MultilabelFormat:
    """Prediction columns of a multilabel run: ``predict`` (the labels whose probability reaches their
    threshold, joined by label_separator; empty for none) and ``prob_<label>`` per label (sigmoid); with
    distill, ``logit_<label>``. numpy output: ``probabilities`` [N, C], ``predictions`` (0/1 [N, C]),
    ``labels``, ``thresholds``. x-serve: ``{"labels": [...], "probabilities": {label: p}}`` per input."""

    def __init__(self, labels: list[str], thresholds: Any, separator: str, distill: bool = False) -> None:
        self.labels, self.thresholds, self.separator, self.distill = labels, thresholds, separator, distill

    def names(self) -> list[str]:
        if self.distill:
            return [f"logit_{label}" for label in self.labels]
        return ["predict"] + [f"prob_{label}" for label in self.labels]

    def probabilities(self, outputs: Any) -> Any:
        return sigmoid(outputs)

    def chosen(self, probabilities: Any) -> list[list[str]]:
        return [[label for label, p, t in zip(self.labels, row, self.thresholds) if p >= t] for row in probabilities]

    def rows(self, outputs: Any, samples: list[dict[str, Any]] | None = None) -> list[list[str]]:
        if self.distill:
            return [[_number(v) for v in row] for row in outputs]
        probabilities = self.probabilities(outputs)
        return [[self.separator.join(chosen), *(_number(p) for p in row)]
                for chosen, row in zip(self.chosen(probabilities), probabilities)]

    def arrays(self, outputs: Any, numbers: list[int]) -> dict[str, Any]:
        out: dict[str, Any] = {"record": np.asarray(numbers, dtype=np.int64)}
        if self.distill:
            out["logits"] = np.asarray(outputs, dtype=np.float32)
            return out
        probabilities = self.probabilities(outputs)
        out["probabilities"] = probabilities.astype(np.float32)
        out["predictions"] = (probabilities >= self.thresholds[None, :]).astype(np.uint8)
        out["labels"] = np.asarray(self.labels, dtype=str)
        out["thresholds"] = np.asarray(self.thresholds, dtype=np.float32)
        return out

    def records(self, outputs: Any, samples: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        probabilities = self.probabilities(outputs)
        return [{"labels": chosen, "probabilities": {label: float(p) for label, p in zip(self.labels, row)}}
                for chosen, row in zip(self.chosen(probabilities), probabilities)]
