"""Entity-level metrics of token classification (NER), counted as conlleval and seqeval (default mode) do:
an entity is right when its span and type both match exactly; entities are read from the tags of each
sentence by :func:`xdpx.data.tags.entity_spans` (invalid sequences read leniently, I-X after O begins one).

- ``entity_precision``, ``entity_recall``, ``entity_f1``: micro-averaged over all entities;
- ``token_accuracy``: share of units whose tag is right (O included, as conlleval's accuracy);
- ``entity_f1_<TYPE>``: F1 of each entity type of the target map (e.g. entity_f1_PER), also selectable as
  major_metric.

The NER loss keeps one row per unit instead of logits: ``rows[:, 0]`` the predicted tag id, ``rows[:, 1]``
1 on a sentence's first unit; the targets are the gold tag ids. Rows of many batches concatenate, so the
numbers of x-eval and of valid.log.tsv come from the same rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from xdpx.data.tags import entity_spans, split_tag
from xdpx.metrics import metrics

PER_TYPE_PREFIX = "entity_f1_"


@dataclass
class EntityCounts:
    """Entities found, predicted and right (per type), and units right, over a whole evaluation."""

    gold: Counter[str] = field(default_factory=Counter)
    predicted: Counter[str] = field(default_factory=Counter)
    correct: Counter[str] = field(default_factory=Counter)
    units: int = 0
    units_right: int = 0

    def add(self, gold_tags: Sequence[str], predicted_tags: Sequence[str]) -> None:
        """Count one sentence."""
        gold, predicted = set(entity_spans(gold_tags)), set(entity_spans(predicted_tags))
        self.gold.update(kind for _, _, kind in gold)
        self.predicted.update(kind for _, _, kind in predicted)
        self.correct.update(kind for _, _, kind in gold & predicted)
        self.units += len(gold_tags)
        self.units_right += sum(g == p for g, p in zip(gold_tags, predicted_tags))

    def scores(self, kind: str | None = None) -> tuple[float, float, float]:
        """(precision, recall, F1) of all entities, or of one type; 0 where nothing is counted."""
        pick = (lambda c: sum(c.values())) if kind is None else (lambda c: c[kind])
        correct, predicted, gold = pick(self.correct), pick(self.predicted), pick(self.gold)
        precision = correct / predicted if predicted else 0.0
        recall = correct / gold if gold else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return precision, recall, f1


def count_entities(sentences: Sequence[tuple[Sequence[str], Sequence[str]]]) -> EntityCounts:
    """Counts over (gold tags, predicted tags) sentence pairs."""
    counts = EntityCounts()
    for gold, predicted in sentences:
        counts.add(gold, predicted)
    return counts


def _register(name: str):  # noqa: ANN202 - a decorator
    def decorator(function):  # noqa: ANN001, ANN202
        function.kind = "entity"
        return metrics.register(name)(function)

    return decorator


@_register("entity_precision")
def entity_precision(c: EntityCounts) -> float:
    """Share of predicted entities whose span and type are right."""
    return c.scores()[0]


@_register("entity_recall")
def entity_recall(c: EntityCounts) -> float:
    """Share of gold entities predicted with the right span and type."""
    return c.scores()[1]


@_register("entity_f1")
def entity_f1(c: EntityCounts) -> float:
    """Harmonic mean of entity_precision and entity_recall (conlleval's FB1 / 100)."""
    return c.scores()[2]


@_register("token_accuracy")
def token_accuracy(c: EntityCounts) -> float:
    """Share of units with the right tag, O included."""
    return c.units_right / c.units if c.units else 0.0


def entity_types(labels: Sequence[str]) -> list[str]:
    """The entity types of a target map's tags, sorted."""
    return sorted({split_tag(label)[1] for label in labels} - {""})


def entity_metrics(rows: np.ndarray, targets: np.ndarray, labels: Sequence[str]) -> dict[str, float]:
    """Every entity metric, and entity_f1_<TYPE> for each type of ``labels``, from per-unit rows."""
    rows = np.asarray(rows).reshape(-1, 2)
    predicted, gold = rows[:, 0].astype(np.int64), np.asarray(targets).reshape(-1).astype(np.int64)
    starts = np.flatnonzero(rows[:, 1] > 0.5).tolist() + [len(rows)]
    names = np.asarray(list(labels), dtype=object)
    counts = count_entities([(names[gold[a:b]].tolist(), names[predicted[a:b]].tolist())
                             for a, b in zip(starts, starts[1:])])
    out = {name: float(metric(counts)) for name, metric in metrics.items() if metric.kind == "entity"}
    out.update({f"{PER_TYPE_PREFIX}{kind}": counts.scores(kind)[2] for kind in entity_types(labels)})
    return out
