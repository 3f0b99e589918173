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
from torch.nn import functional as F

from xdpx.config.options import Option
from xdpx.logger import log
from xdpx.models import models
from xdpx.models.cnn import TextCNN
from xdpx.models.modules.pooling import masked_max


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
class PlantedNaN(TextCNN):
    """TextCNN with a planted NaN source between the pooled features and the output layer."""

    options = [
        *TextCNN.options,
        Option("nan_after_calls", int, default=0, doc="training forward calls before the fault"),
        Option("nan_in", str, default="forward", choices=("forward", "backward"), doc="where NaN appears"),
    ]

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.fault_name = "poison" if args.nan_in == "forward" else "norm_guard"
        fault = Poison if args.nan_in == "forward" else NormGuard
        self.add_module(self.fault_name, fault(args.nan_after_calls))

    def forward(self, tokens: torch.Tensor, **_: Any) -> torch.Tensor:
        mask = tokens.ne(self.pad_index)
        x = self.embedding(tokens).masked_fill(~mask.unsqueeze(-1), 0.0).transpose(1, 2)
        features = torch.cat([masked_max(F.relu(conv(x)).transpose(1, 2), mask) for conv in self.convs], -1)
        return self.output(self.out(getattr(self, self.fault_name)(features)))


def hit_rate(values: list[Any]) -> dict[str, float]:
    """reduce_fn of the accumulative summary: the fraction of positive logits margins over the split."""
    hits = torch.cat([v[0] for v in values])
    return {"margin_positive_rate": float(hits.float().mean()), "eval_batches": float(len(values))}


@models.register("summary_cnn")
class SummaryCNN(TextCNN):
    """TextCNN that reports summaries through xdpx.logger.log."""

    options = [*TextCNN.options,
               Option("late_after_calls", int, default=6, doc="training calls before 'late_norm' is added")]

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.late_after = args.late_after_calls
        # a buffer, so the count is in the saved state and a resumed run adds 'late_norm' at the same update
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))

    def forward(self, tokens: torch.Tensor, **kw: Any) -> torch.Tensor:
        logits = super().forward(tokens, **kw)
        if self.training:
            self.calls += 1
            log.add_summary("logit_abs_mean", logits.detach().abs().mean())
            log.add_summary("batch_tokens", float(tokens.ne(self.pad_index).sum()))
            if int(self.calls) > self.late_after:
                log.add_summary("late_norm", self.out.weight.detach().norm())
        else:
            margin = (logits[:, 1] - logits[:, 0]).detach().cpu() > 0
            log.add_accumulative_summary("margin", (margin,), reduce_fn=hit_rate)
        return logits
