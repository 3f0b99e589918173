"""Masked-language-model losses: ``mlm`` (bert_lm) and ``mlm_sop`` (bert_pretrain: MLM + sentence order).

The target of an MLM batch is ``[B, T]``: the original id at masked positions, -100 elsewhere. The model
is asked for logits at the masked positions only (``masked_positions``), so the vocabulary projection
costs N x vocab instead of B x T x vocab. The loss is summed over the masked tokens and normalised by
their number (sample_size = masked tokens), so update_freq and several processes give the same update as
one big batch. For ``mlm_sop`` the sentence-order label rides in ``target[:, 0]`` (the [CLS] position,
never masked); see the bert_pretrain processor.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from xdpx.config.options import Option, Rule
from xdpx.config.ranges import at_least
from xdpx.data.processing import IGNORE_INDEX
from xdpx.losses import losses
from xdpx.losses.base import Loss, major_metric_rule, step_logs
from xdpx.metrics.mlm import mlm_metrics

PERPLEXITY_RULE = Rule(lambda a: a.major_metric != "mlm_perplexity" or not a.ascending_metric,
                       "mlm_perplexity is lower-is-better: set ascending_metric: false",
                       keys=("major_metric", "ascending_metric"))


def _rows(kind: int, nll: torch.Tensor, correct: torch.Tensor) -> torch.Tensor:
    """(kind, nll, correct) rows for xdpx.metrics.mlm."""
    return torch.stack((torch.full_like(nll, kind), nll, correct.to(nll.dtype)), dim=1).detach()


@losses.register("mlm")
class MaskedLMLoss(Loss):
    """Cross-entropy of the masked tokens (bert_lm); metrics mlm_accuracy and mlm_perplexity."""

    kinds = ("mlm",)
    options = [major_metric_rule(("mlm",), "mlm_accuracy, mlm_perplexity"), PERPLEXITY_RULE]

    def mlm_terms(self, logits: torch.Tensor, gold: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        nll = F.cross_entropy(logits.float(), gold, reduction="none")
        return nll, logits.argmax(-1) == gold

    def __call__(self, model: nn.Module, batch: dict[str, Any],
                 keep_outputs: bool = False) -> tuple[torch.Tensor, int, dict[str, Any]]:
        target = batch["target"]
        positions = target.ne(IGNORE_INDEX)
        logits = model(**batch["net_input"], masked_positions=positions)
        gold = target[positions]
        nll, correct = self.mlm_terms(logits, gold)
        loss_sum, sample_size = nll.sum(), int(gold.numel())
        outputs = (_rows(0, nll, correct), gold) if keep_outputs else None
        return loss_sum, sample_size, step_logs(loss_sum, int(target.size(0)), sample_size, outputs)

    def compute_metrics(self, rows: torch.Tensor, targets: torch.Tensor) -> dict[str, float]:
        return mlm_metrics(rows.double().cpu().numpy(), self.kinds)


@losses.register("mlm_sop")
class MaskedLMSentenceOrderLoss(MaskedLMLoss):
    """MLM plus sentence-order prediction (ALBERT) for bert_pretrain: the SOP cross-entropy of a block
    is weighted by sop_weight x (masked tokens per block of the batch), so both terms count per block
    as in ALBERT's mean + mean, while the sum stays normalised by the masked tokens."""

    kinds = ("mlm", "sop")
    options = [
        Option("sop_weight", float, default=1.0, validate=at_least(0),
               doc="weight of the sentence-order loss against the masked-LM loss"),
        major_metric_rule(("mlm", "sop"), "mlm_accuracy, mlm_perplexity, sop_accuracy"),
        PERPLEXITY_RULE,
    ]

    def __call__(self, model: nn.Module, batch: dict[str, Any],
                 keep_outputs: bool = False) -> tuple[torch.Tensor, int, dict[str, Any]]:
        target = batch["target"]
        order = target[:, 0].clone()
        mlm_target = target.clone()
        mlm_target[:, 0] = IGNORE_INDEX
        positions = mlm_target.ne(IGNORE_INDEX)
        mlm_logits, sop_logits = model(**batch["net_input"], masked_positions=positions)
        gold = mlm_target[positions]
        nll, correct = self.mlm_terms(mlm_logits, gold)
        sop_nll = F.cross_entropy(sop_logits.float(), order, reduction="none")
        per_block = gold.numel() / max(target.size(0), 1)
        loss_sum = nll.sum() + self.args.sop_weight * per_block * sop_nll.sum()
        sample_size = int(gold.numel())
        outputs = (torch.cat((_rows(0, nll, correct), _rows(1, sop_nll, sop_logits.argmax(-1) == order))),
                   torch.cat((gold, order))) if keep_outputs else None
        return loss_sum, sample_size, step_logs(loss_sum, int(target.size(0)), sample_size, outputs)
