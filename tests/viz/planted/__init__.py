"""A user_dir for the x-viz / debugging tests: small real models with planted faults and summaries.

- ``planted_nan``: cls_cnn whose submodule ``poison`` turns its input into NaN after some training calls
  (forward NaN), or, with ``nan_in: backward``, whose submodule ``norm_guard`` is finite forward and
  produces NaN only in backward (sqrt at 0).
- ``summary_cnn``: cls_cnn that logs summaries (one of them first added after some calls) and an
  accumulative summary during evaluation.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xdpx.config.options import Option
from xdpx.logger import log
from xdpx.models import models
from xdpx.models.composed import EncoderHeadModel, compose


class CNNModel(EncoderHeadModel):
    """cls_cnn (the cnn encoder and the classification head) built as a subclass, to plant faults in."""

    options = list(models.get("cls_cnn").options)

    @classmethod
    def build(cls, args: Any) -> CNNModel:
        return compose(args, "cnn", "classification", {"pooling": "max"}, model_class=cls)


class Poison(nn.Module):
    """Identity for ``after`` training calls, then 0/0 in the forward pass."""

    def __init__(self, after: int) -> None:
        super().__init__()
        self.after, self.calls = after, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.calls += 1
        if self.calls > self.after:
            zero = x - x
            return zero / zero
        return x


class NormGuard(nn.Module):
    """x + sqrt(sum(x - x)): finite forward (adds 0), NaN gradient (d sqrt at 0 is inf, times 0)."""

    def __init__(self, after: int) -> None:
        super().__init__()
        self.after, self.calls = after, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.calls += 1
        if self.calls > self.after:
            return x + torch.sqrt((x - x).sum(-1, keepdim=True))
        return x


@models.register("planted_nan")
class PlantedNaN(CNNModel):
    """cls_cnn with a planted NaN source between the pooled features and the output layer."""

    options = [
        *CNNModel.options,
        Option("nan_after_calls", int, default=0, doc="training forward calls before the fault"),
        Option("nan_in", str, default="forward", choices=("forward", "backward"), doc="where NaN appears"),
    ]

    def __init__(self, encoder: Any, head: Any, legacy_keys: Any = None) -> None:
        super().__init__(encoder, head, legacy_keys)
        args = encoder.args
        self.fault_name = "poison" if args.nan_in == "forward" else "norm_guard"
        fault = Poison if args.nan_in == "forward" else NormGuard
        self.add_module(self.fault_name, fault(args.nan_after_calls))

    def forward(self, perturb: Any = None, **net_input: Any) -> torch.Tensor:
        encoder, head = self.text_encoder, self.task_head
        text = encoder.text(net_input)
        features = encoder.pool(encoder.encode(text), text)
        return head.classify(getattr(self, self.fault_name)(features))


def hit_rate(values: list[Any]) -> dict[str, float]:
    """reduce_fn of the accumulative summary: the fraction of positive logits margins over the split."""
    hits = torch.cat([v[0] for v in values])
    return {"margin_positive_rate": float(hits.float().mean()), "eval_batches": float(len(values))}


@models.register("summary_cnn")
class SummaryCNN(CNNModel):
    """cls_cnn that reports summaries through xdpx.logger.log."""

    options = [*CNNModel.options,
               Option("late_after_calls", int, default=6, doc="training calls before 'late_norm' is added")]

    def __init__(self, encoder: Any, head: Any, legacy_keys: Any = None) -> None:
        super().__init__(encoder, head, legacy_keys)
        self.late_after = encoder.args.late_after_calls
        # a buffer, so the count is in the saved state and a resumed run adds 'late_norm' at the same update
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))

    def forward(self, tokens: torch.Tensor, **kw: Any) -> torch.Tensor:
        logits = super().forward(tokens=tokens, **kw)
        if self.training:
            self.calls += 1
            log.add_summary("logit_abs_mean", logits.detach().abs().mean())
            log.add_summary("batch_tokens", float(tokens.ne(self.text_encoder.pad_index).sum()))
            if int(self.calls) > self.late_after:
                log.add_summary("late_norm", self.classifier.weight.detach().norm())
        else:
            margin = (logits[:, 1] - logits[:, 0]).detach().cpu() > 0
            log.add_accumulative_summary("margin", (margin,), reduce_fn=hit_rate)
        return logits
