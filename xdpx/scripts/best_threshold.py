"""``x-script best_threshold PREDICTIONS [--beta 1] [--positive LABEL] [--truth label] [--separator |]``: the
decision thresholds with the best F-beta, from x-pred's TSV of a labelled dev input.

Two kinds of PREDICTIONS (``header`` and ``concat_origin`` on, the defaults):

- a single-label classifier's (columns ``predict``, ``prob``, ``prob_<label>``: two classes, or one sigmoid
  logit as trained with ``loss: bce``, or a one-vs-rest bce model). For the positive label (default: class 1
  of a binary model; every label of a model with more classes, each against the rest) the tool prints the
  threshold with the best F-beta. ``x-script bce_threshold`` (the original XDPX's name) is this tool.
- a multilabel run's (``loss: multilabel_bce``: columns ``predict`` and ``prob_<label>``, no ``prob``; the
  truth column holds label sets joined by ``--separator``, or JSON lists). Each label gets its own best
  threshold (F-beta of that label), and the row ``*`` gives the one global threshold with the best micro
  F-beta (all sample-label cells pooled); then the two lines to put in the training config
  (``label_thresholds: {...}`` and ``decision_threshold: ...``) so that valid.log.tsv, x-eval, x-pred and
  x-serve decide with them.

For each label the tool tries every cut between two neighbouring probabilities and prints, tab-separated:
the label, the threshold (predict the label when its probability is >= threshold; the midpoint between
the two neighbouring probabilities), F-beta, precision, recall and the number of samples predicted
positive. F-beta = (1 + b^2) P R / (b^2 P + R): beta > 1 favours recall, beta < 1 precision. Among equal
F-beta the higher threshold wins. Nothing is written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from xdpx.command import script
from xdpx.config.errors import ConfigError
from xdpx.data.targets import label_names
from xdpx.errors import UserError
from xdpx.io.tsv_cells import unescape
from xdpx.scripts.result_tables import (
    PredictionTable,
    number_flag,
    read_prediction_rows,
    read_predictions,
    split_flags,
)

USAGE = ("usage: x-script best_threshold PREDICTIONS [--beta 1] [--positive LABEL] [--truth label] "
         "[--separator |]")


@dataclass
class Threshold:
    label: str
    threshold: float
    f_beta: float
    precision: float
    recall: float
    predicted_positive: int


def f_beta(tp: int, fp: int, fn: int, beta: float) -> float:
    """(1 + b^2) tp / ((1 + b^2) tp + b^2 fn + fp); 0 when nothing is right."""
    b2 = beta * beta
    return (1 + b2) * tp / ((1 + b2) * tp + b2 * fn + fp) if tp else 0.0


def best_threshold(probabilities: list[float], positive: list[bool], beta: float, label: str = "") -> Threshold:
    """The cut with the best F-beta: samples sorted by probability, every cut between two different
    probabilities tried once (equal probabilities fall on the same side)."""
    order = sorted(zip(probabilities, positive), key=lambda pair: -pair[0])
    total_positive = sum(positive)
    best = Threshold(label, 1.0 + 1e-9, 0.0, 0.0, 0.0, 0)  # nothing predicted positive
    tp = fp = 0
    for i, (p, is_positive) in enumerate(order):
        tp, fp = tp + is_positive, fp + (not is_positive)
        if i + 1 < len(order) and order[i + 1][0] == p:
            continue  # a cut only between different probabilities
        score = f_beta(tp, fp, total_positive - tp, beta)
        if score > best.f_beta:
            cut = (p + order[i + 1][0]) / 2 if i + 1 < len(order) else p
            best = Threshold(label, cut, score, tp / (tp + fp), tp / total_positive if total_positive else 0.0, i + 1)
    return best


def thresholds(table: PredictionTable, beta: float, positive_label: str | None) -> list[Threshold]:
    labels = table.labels
    if len(labels) < 2:
        raise UserError(f"{table.path}: fewer than two prob_<label> columns: this is not a classifier's output")
    if positive_label is not None:
        if positive_label not in labels:
            raise UserError(f"--positive {positive_label!r} is not one of the run's labels ({', '.join(labels)})")
        chosen = [positive_label]
    else:
        chosen = labels[1:] if len(labels) == 2 else labels
    found = []
    for label in chosen:
        positive = [t == label for t in table.truth]
        if not any(positive):
            raise UserError(f"{table.path}: no sample is labelled {label!r}: a threshold needs positives")
        found.append(best_threshold(table.probabilities[label], positive, beta, label))
    return found


def multilabel_thresholds(path: str, header: list[str], rows: list[list[str]], truth_column: str,
                          separator: str, beta: float) -> list[Threshold]:
    """Per label, then ``*`` (one threshold for all labels, micro F-beta), from a multilabel x-pred TSV."""
    labels = [name[len("prob_"):] for name in header if name.startswith("prob_")]
    truth_at = header.index(truth_column)
    truth_sets = [set(label_names(unescape(cells[truth_at]), {"target_type": "multilabel",
                                                                  "label_separator": separator}))
                  for cells in rows]
    found, pooled_probabilities, pooled_positive = [], [], []
    for label in labels:
        at = header.index(f"prob_{label}")
        try:
            probabilities = [float(cells[at]) for cells in rows]
        except ValueError:
            raise UserError(f"{path}: a prob_{label} cell is not a number") from None
        positive = [label in truth for truth in truth_sets]
        pooled_probabilities += probabilities
        pooled_positive += positive
        if any(positive):  # a label without positives in dev keeps the global threshold
            found.append(best_threshold(probabilities, positive, beta, unescape(label)))
    if not any(pooled_positive):
        raise UserError(f"{path}: no sample has a label: a threshold needs positives")
    found.append(best_threshold(pooled_probabilities, pooled_positive, beta, "*"))
    return found


def print_thresholds(found: list[Threshold], beta: float) -> None:
    print(f"label\tthreshold\tf{beta:g}\tprecision\trecall\tpredicted_positive")
    for t in found:
        print(f"{t.label}\t{t.threshold:.9g}\t{t.f_beta:.6g}\t{t.precision:.6g}\t{t.recall:.6g}\t{t.predicted_positive}")


@script("best_threshold")
def main(argv: list[str], usage: str = USAGE) -> int:
    """The decision thresholds with the best F-beta on x-pred's dev predictions (binary, bce, multilabel)."""
    positional, flags = split_flags(argv, {"beta": "1", "positive": None, "truth": "label", "separator": "|"},
                                    usage)
    if len(positional) != 1:
        raise ConfigError([usage])
    beta = number_flag(flags, "beta", usage, low=0)
    path, truth = positional[0], str(flags["truth"])
    header, rows = read_prediction_rows(path, (truth,), flags="--truth")
    if "prob" in header:  # a single-label classifier's columns: predict, prob, prob_<label>...
        table = read_predictions(path, truth)
        print_thresholds(thresholds(table, beta, flags["positive"]), beta)
        return 0
    if flags["positive"] is not None:
        raise UserError("--positive is for a single-label classifier's predictions; a multilabel run's gets a "
                        "threshold for every label")
    found = multilabel_thresholds(path, header, rows, truth, str(flags["separator"]), beta)
    print_thresholds(found, beta)
    per_label = ", ".join(f"{json.dumps(t.label, ensure_ascii=False)}: {min(t.threshold, 1.0):.9g}"
                          for t in found[:-1])
    print(f"# for the training config (multilabel_bce):\n# label_thresholds: {{{per_label}}}\n"
          f"# decision_threshold: {min(found[-1].threshold, 1.0):.9g}")
    return 0
