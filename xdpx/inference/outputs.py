"""What x-pred writes: prediction columns from logits, the TSV escaping, numpy output.

Columns (``header: true`` writes their names first):

- classification: ``predict`` (the label), ``prob`` (its probability), ``prob_<label>`` per class;
- regression: ``score``;
- ``distill: true``: the raw logits only, ``logit_<label>`` per class (``logit`` for one output).

Probabilities are those the metrics use (xdpx.metrics.predictions): softmax over class logits, a
sigmoid for a single logit. With ``concat_origin`` the record's original columns come first.

A task whose predictions are not class rows (NER entities, multi-label sets, embeddings) gives its own
format: ``task.prediction_format(args, labels)`` returns an object with the methods of
:class:`PredictionFormat` (``names()``, ``rows(outputs, samples)``, ``arrays(outputs, numbers)``,
``records(outputs, samples)``), or None for the columns above (:func:`prediction_format`). Cells are raw
text: the writer escapes them.

TSV cells never contain a tab or a line break: ``\\`` is written ``\\\\``, a tab ``\\t``, a newline
``\\n`` and a carriage return ``\\r`` (:func:`escape`; :func:`unescape` reverses it; xdpx/io/tsv_cells.py).
Quotes are plain characters, so ``pd.read_csv(f, sep='\\t', header=0, quoting=csv.QUOTE_NONE)`` reads the
file back cell for cell.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from xdpx.errors import UserError


def probabilities(logits: np.ndarray, regression: bool) -> np.ndarray:
    """Class probabilities ``[N, C]`` (softmax; a single logit: [1 - p, p]) or the scores ``[N]``."""
    logits = np.asarray(logits, dtype=np.float64)
    if regression:
        return logits.reshape(-1)
    if logits.ndim == 1:
        positive = 1.0 / (1.0 + np.exp(-logits))
        return np.stack([1.0 - positive, positive], axis=1)
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def _number(x: float) -> str:
    return f"{float(x):.7g}"


class PredictionFormat:
    """Names and cells of the prediction columns for a run (labels from its target map)."""

    def __init__(self, labels: list[str] | None, regression: bool, distill: bool, single_logit: bool = False) -> None:
        self.labels, self.regression, self.distill = labels or [], regression, distill
        self.single_logit = single_logit

    def names(self) -> list[str]:
        if self.distill:
            return ["logit"] if self.regression or self.single_logit else [f"logit_{label}" for label in self.labels]
        if self.regression:
            return ["score"]
        return ["predict", "prob"] + [f"prob_{label}" for label in self.labels]

    def rows(self, logits: np.ndarray, samples: list[dict[str, Any]] | None = None) -> list[list[str]]:
        """The prediction cells of each sample (raw text: the writer escapes them)."""
        logits = np.asarray(logits, dtype=np.float64)
        if self.distill:
            return [[_number(v) for v in np.atleast_1d(row)] for row in logits]
        values = probabilities(logits, self.regression)
        if self.regression:
            return [[_number(v)] for v in values]
        best = values.argmax(axis=1)
        return [[self.labels[k], _number(p[k]), *(_number(v) for v in p)] for k, p in zip(best, values)]

    def records(self, logits: np.ndarray, samples: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """x-serve's JSON object of each sample: label, prob and every class probability (or the score)."""
        values = probabilities(np.asarray(logits, dtype=np.float64), self.regression)
        if self.regression:
            return [{"score": float(v)} for v in values]
        out = []
        for row in values:
            best = int(row.argmax())
            out.append({"label": self.labels[best], "prob": float(row[best]),
                        "probabilities": {label: float(p) for label, p in zip(self.labels, row)}})
        return out

    def arrays(self, logits: np.ndarray, numbers: list[int]) -> dict[str, np.ndarray]:
        """The numpy output (``binary: true``): record numbers and logits, probabilities or scores."""
        logits = np.asarray(logits, dtype=np.float32)
        out: dict[str, np.ndarray] = {"record": np.asarray(numbers, dtype=np.int64)}
        if self.distill:
            out["logits"] = logits
        elif self.regression:
            out["scores"] = probabilities(logits, True).astype(np.float32)
        else:
            values = probabilities(logits, False).astype(np.float32)
            out["probabilities"] = values
            out["predictions"] = values.argmax(axis=1).astype(np.int64)
            out["labels"] = np.asarray(self.labels, dtype=str)
        return out


def prediction_format(task: Any, args: Any, labels: list[str] | None, regression: bool) -> Any:
    """The task's own format (``task.prediction_format(args, labels)``), else the class / regression
    columns; ``args``: x-pred's options (None from x-serve)."""
    own = getattr(task, "prediction_format", None)
    fmt = own(args, labels) if callable(own) else None
    if fmt is not None:
        return fmt
    if not regression and labels is None:
        raise UserError("the run's data has no target_map.txt: cannot name the classes")
    distill = bool(args.get("distill")) if args is not None else False
    return PredictionFormat(labels, regression, distill)


def concat_padded(arrays: list[np.ndarray], fill: float = -1) -> np.ndarray:
    """Chunks of outputs as one array; per-token outputs whose dim 1 differs between chunks are padded."""
    if len(arrays) > 1 and arrays[0].ndim > 1 and len({a.shape[1:] for a in arrays}) > 1:
        width = max(a.shape[1] for a in arrays)
        arrays = [np.pad(a, [(0, 0), (0, width - a.shape[1])] + [(0, 0)] * (a.ndim - 2), constant_values=fill)
                  for a in arrays]
    return np.concatenate(arrays)


def origin_names(width: int, loader: Any, labelled: bool, table_columns: list[str] | None) -> list[str]:
    """Header names of the original columns: a table's own names, else text / text1, text2 / label / colN."""
    if table_columns:
        return list(table_columns[:width]) + [f"col{i}" for i in range(len(table_columns), width)]
    names = [f"col{i}" for i in range(width)]
    if labelled or loader.label_column is None:
        positions = [c % width for c in loader.text_columns] if width else []
    else:  # an unlabelled file holds the texts alone, in order
        positions = list(range(min(loader.num_texts, width)))
    for k, position in enumerate(positions):
        names[position] = "text" if len(positions) == 1 else f"text{k + 1}"
    if labelled and loader.label_column is not None and width:
        names[loader.label_column % width] = "label"
    return names
