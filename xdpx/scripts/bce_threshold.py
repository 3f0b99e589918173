"""``x-script bce_threshold PREDICTIONS [--beta 1] [--positive LABEL] [--truth label]``: the decision
threshold with the best F-beta.

PREDICTIONS is the TSV x-pred writes for a labelled dev input (header and concat_origin on, the defaults)
of a binary model (two classes, or one sigmoid logit as trained with ``loss: bce``), or of a one-vs-rest
bce model. For the positive label (default: class 1 of a binary model; every label of a model with more
classes, each against the rest) the tool tries every cut between two neighbouring probabilities
``prob_<label>`` and prints, tab-separated: the label, the threshold (predict the label when its probability
is >= threshold; the midpoint between the two neighbouring probabilities), F-beta, precision, recall and the
number of samples predicted positive. F-beta = (1 + b^2) P R / (b^2 P + R): beta > 1 favours recall,
beta < 1 precision. Among equal F-beta the higher threshold wins. Nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdpx.command import script
from xdpx.config.errors import ConfigError
from xdpx.errors import UserError
from xdpx.scripts.result_tables import PredictionTable, number_flag, read_predictions, split_flags

USAGE = "usage: x-script bce_threshold PREDICTIONS [--beta 1] [--positive LABEL] [--truth label]"


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


@script("bce_threshold")
def main(argv: list[str]) -> int:
    """The decision threshold with the best F-beta on x-pred's dev predictions of a binary/bce model."""
    positional, flags = split_flags(argv, {"beta": "1", "positive": None, "truth": "label"}, USAGE)
    if len(positional) != 1:
        raise ConfigError([USAGE])
    beta = number_flag(flags, "beta", USAGE, low=0)
    table = read_predictions(positional[0], str(flags["truth"]))
    print(f"label\tthreshold\tf{beta:g}\tprecision\trecall\tpredicted_positive")
    for found in thresholds(table, beta, flags["positive"]):
        print(f"{found.label}\t{found.threshold:.6g}\t{found.f_beta:.6g}\t{found.precision:.6g}\t{found.recall:.6g}"
              f"\t{found.predicted_positive}")
    return 0
