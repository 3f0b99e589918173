"""Metrics of an evaluation, computed on the concatenated logits and targets of the whole split.

``compute_metrics(logits, targets, args) -> {name: float}``. Each metric is a function registered in
``metrics`` under the name it reports (that name is what ``major_metric`` selects), with the family of
predictions it applies to:

- ``classification`` (integer targets): accuracy, macro_/micro_ precision, recall, f1;
- ``binary`` (2 classes, or one sigmoid logit): precision, recall, f1 and auc of the positive class 1;
- ``regression`` (float targets): pearson, spearman.

When meta.hjson has ``special_targets``, the first of them (class 0) is the negative class: macro and
micro averages leave it out, as is usual for tasks where most samples are "none of the above".
"""

from __future__ import annotations

from typing import Any

from xdpx.registry import Registry

metrics = Registry("metric", modules=("xdpx.metrics.classification", "xdpx.metrics.regression", "xdpx.metrics.mlm",
                                       "xdpx.metrics.multilabel", "xdpx.metrics.entities"))


def metric_names(kinds: tuple[str, ...]) -> list[str]:
    """The names reported for predictions of these families (major_metric must be one, or 'loss')."""
    return [name for name, metric in metrics.items() if metric.kind in kinds]


def compute_metrics(logits: Any, targets: Any, args: Any) -> dict[str, float]:
    """Every metric that applies to these predictions; see :mod:`xdpx.metrics.predictions`."""
    # lazy: predictions needs numpy (x-train --help lists metric names without it) and imports this registry
    from xdpx.metrics.predictions import Predictions

    predictions = Predictions.from_outputs(logits, targets, args)
    return {name: float(metric(predictions)) for name, metric in metrics.items()
            if metric.kind in predictions.kinds}
