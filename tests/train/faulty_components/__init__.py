"""A user_dir for the x-train tests: cls_cnn with faults switched on by options (out of memory above a
batch size, NaN output after some forward calls, huge logits that overflow in fp16)."""

from __future__ import annotations

import os
from typing import Any

import torch

from xdpx.config.options import Option
from xdpx.models import models
from xdpx.models.cnn import TextCNN


@models.register("faulty_cnn")
class FaultyCNN(TextCNN):
    """TextCNN that fails on purpose."""

    options = [
        *TextCNN.options,
        Option("oom_above_batch", int, default=None, doc="raise torch.OutOfMemoryError for larger batches"),
        Option("oom_rank", int, default=None, doc="only this process (RANK) runs out of memory; null: every one"),
        Option("nan_after_calls", int, default=None, doc="training forward calls before the output is NaN"),
        Option("logit_gain", float, default=1.0, doc="multiplies the logits (1e6 overflows fp16)"),
    ]

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.oom_above_batch, self.nan_after_calls = args.oom_above_batch, args.nan_after_calls
        self.oom_here = args.oom_rank is None or args.oom_rank == int(os.environ.get("RANK", "0"))
        self.logit_gain = args.logit_gain
        self.calls = 0

    def forward(self, tokens: torch.Tensor, **kw: Any) -> torch.Tensor:
        if self.oom_above_batch is not None and tokens.size(0) > self.oom_above_batch and self.oom_here:
            raise torch.OutOfMemoryError(f"injected: batch of {tokens.size(0)} > {self.oom_above_batch}")
        out = super().forward(tokens, **kw) * self.logit_gain
        if self.training:
            self.calls += 1
            if self.nan_after_calls is not None and self.calls > self.nan_after_calls:
                out = out * float("nan")
        return out
