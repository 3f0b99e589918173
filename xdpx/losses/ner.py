"""token_cross_entropy: the loss of token classification (NER), with the helpers the ner task shares.

The model gives a score per token ``[B, T, C]``; the batch's ``unit_mask`` ``[B, T]`` says which token
carries each unit's tag (every token for the ``ner`` processor, each unit's first subword for
``bert_ner``). :func:`unit_scores` gathers those rows into ``[B, U, C]``. Without a CRF the loss is the
cross-entropy of each unit, summed and normalised by the number of units; with ``crf: true`` it is the
negative log-likelihood of each sentence's tag sequence, normalised by the number of sentences. Either
way the effective batch contract holds (sums, divided by the whole update's sample_size).

For metrics the loss keeps one row per unit (predicted tag, 1 on a sentence's first unit) and the gold
tags: see xdpx.metrics.entities.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from xdpx.config.errors import ConfigError
from xdpx.config.options import Rule
from xdpx.data.processing import IGNORE_INDEX, TARGET_MAP_FILE, find_target_map
from xdpx.losses import losses
from xdpx.losses.base import Loss, step_logs
from xdpx.metrics import metric_names
from xdpx.metrics.entities import PER_TYPE_PREFIX, entity_metrics, entity_types

ENTITY_METRICS = "entity_f1, entity_precision, entity_recall, token_accuracy, entity_f1_<TYPE> (e.g. entity_f1_PER)"


def crf_of(model: nn.Module) -> Any:
    """The CRF of a tagger (None without one), through DDP (``module``) and torch.compile (``_orig_mod``)."""
    while not hasattr(model, "crf") and (hasattr(model, "module") or hasattr(model, "_orig_mod")):
        model = getattr(model, "module", None) or model._orig_mod
    return getattr(model, "crf", None)


def unit_scores(scores: torch.Tensor, unit_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``[B, U, C]`` scores of the tokens ``unit_mask`` marks (in order) and the ``[B, U]`` mask of real units."""
    unit_mask = unit_mask.to(scores.device)
    counts = unit_mask.sum(dim=1)
    width = max(int(counts.max()), 1) if counts.numel() else 1
    # the marked positions first, in their order (a stable sort of 0 = marked before 1 = not)
    positions = torch.sort((~unit_mask).to(torch.int8), dim=1, stable=True).indices[:, :width]
    gathered = scores.gather(1, positions.unsqueeze(-1).expand(-1, -1, scores.size(-1)))
    real = torch.arange(width, device=scores.device).unsqueeze(0) < counts.unsqueeze(1)
    return gathered, real


def decode(model: nn.Module, scores: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """Tag ids ``[B, U]`` (-1 after each sentence): Viterbi with a CRF, else each unit's best tag."""
    crf = crf_of(model)
    best = crf.viterbi(scores, real) if crf is not None else scores.argmax(dim=-1)
    return best.masked_fill(~real, -1)


def target_labels(args: Any) -> list[str]:
    """The run's tags in id order: target_map.txt of the run directory, else of data_dir."""
    found = find_target_map(args.get("save_dir"), args.get("data_dir"))
    if found is not None:
        return found[1]
    raise FileNotFoundError(f"no {TARGET_MAP_FILE} in save_dir or data_dir: the tags cannot be named")


def _entity_metric(args: Any) -> bool:
    name = args.major_metric
    return name == "loss" or name in metric_names(("entity",)) or name.startswith("entity_f1_")


@losses.register("token_cross_entropy")
class TokenCrossEntropy(Loss):
    """Cross-entropy of each unit's tag (or, with the model's crf, the CRF sentence log-likelihood)."""

    kinds = ("entity",)
    options = [
        Rule(_entity_metric, f"major_metric is not reported with this loss; choose 'loss' or one of: {ENTITY_METRICS}",
             keys=("major_metric", "loss")),
        Rule(lambda a: a.get("processor") in ("ner", "bert_ner"),
             "loss token_cross_entropy needs tags per unit: processor ner or bert_ner", keys=("loss", "processor")),
        Rule(lambda a: a.get("task") == "ner", "loss token_cross_entropy goes with task: ner (its decoding gives "
             "x-pred and x-serve their entities)", keys=("loss", "task")),
    ]

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self._labels: list[str] | None = None
        self.check_major_metric()

    def check_major_metric(self) -> None:
        """entity_f1_<TYPE> must name a type of the target map (known once data_dir exists, before any work)."""
        name = self.args.get("major_metric") or ""
        if not name.startswith(PER_TYPE_PREFIX):
            return
        try:
            types = entity_types(self.labels())
        except FileNotFoundError:
            return
        if name[len(PER_TYPE_PREFIX):] not in types:
            where = self.args.source("major_metric") if hasattr(self.args, "source") else "major_metric"
            raise ConfigError([f"{where}: key 'major_metric': {name!r} names no entity type of the target map; "
                               f"choose one of {[PER_TYPE_PREFIX + t for t in types]} or entity_f1"])

    def __call__(self, model: nn.Module, batch: dict[str, Any],
                 keep_outputs: bool = False) -> tuple[torch.Tensor, int, dict[str, Any]]:
        scores, real = unit_scores(model(**batch["net_input"]), batch["unit_mask"])
        target = batch["target"][:, : scores.size(1)]
        crf = crf_of(model)
        if crf is not None:
            loss_sum = -crf.log_likelihood(scores, target, real).sum()
            sample_size = int(target.size(0))
        else:
            loss_sum = F.cross_entropy(scores.float().flatten(0, 1), target.flatten(), ignore_index=IGNORE_INDEX,
                                       reduction="sum")
            sample_size = int(real.sum())
        outputs = None
        if keep_outputs:
            predicted = decode(model, scores.detach(), real)
            first = torch.zeros_like(real)
            first[:, 0] = True
            outputs = (torch.stack((predicted[real], first[real]), dim=1).float(), target[real])
        return loss_sum, sample_size, step_logs(loss_sum, int(target.size(0)), sample_size, outputs)

    def labels(self) -> list[str]:
        if self._labels is None:
            self._labels = target_labels(self.args)
        return self._labels

    def compute_metrics(self, rows: torch.Tensor, targets: torch.Tensor) -> dict[str, float]:
        return entity_metrics(rows.cpu().numpy(), targets.cpu().numpy(), self.labels())
