"""A user_dir for the x-train tests: cls_cnn with faults switched on by options (out of memory above a
batch size, NaN output after some forward calls, huge logits that overflow in fp16), and a preemption
signal the process sends itself, switched on by the environment so that the rerun of the very same
config runs without it: XDPX_TEST_SIGNAL=SIGNAL:WHERE:N[:RANK] sends SIGNAL (SIGUSR1, SIGTERM) to this
process in the middle of its N-th forward call in training (WHERE=train) or in evaluation (WHERE=eval),
on process RANK only when given; WHERE=import sends it as this user_dir is imported (x-train's start-up:
the config is being resolved), WHERE=build as the model is built (N: 1)."""

from __future__ import annotations

import os
import signal
from typing import Any

import torch

from xdpx.config.options import Option
from xdpx.models import models
from xdpx.models.composed import EncoderHeadModel, compose


@models.register("faulty_cnn")
class FaultyCNN(EncoderHeadModel):
    """cls_cnn (the cnn encoder and the classification head) that fails on purpose."""

    options = [
        *models.get("cls_cnn").options,
        Option("oom_above_batch", int, default=None, doc="raise torch.OutOfMemoryError for larger batches"),
        Option("oom_rank", int, default=None, doc="only this process (RANK) runs out of memory; null: every one"),
        Option("nan_after_calls", int, default=None, doc="training forward calls before the output is NaN"),
        Option("logit_gain", float, default=1.0, doc="multiplies the logits (1e6 overflows fp16)"),
    ]

    @classmethod
    def build(cls, args: Any) -> FaultyCNN:
        return compose(args, "cnn", "classification", {"pooling": "max"}, model_class=cls)

    def __init__(self, encoder: Any, head: Any, legacy_keys: Any = None) -> None:
        super().__init__(encoder, head, legacy_keys)
        args = encoder.args
        self.oom_above_batch, self.nan_after_calls = args.oom_above_batch, args.nan_after_calls
        self.oom_here = args.oom_rank is None or args.oom_rank == int(os.environ.get("RANK", "0"))
        self.logit_gain = args.logit_gain
        self.calls = 0
        self.signal_plan = signal_plan(os.environ.get("XDPX_TEST_SIGNAL"))
        self.signal_calls = {"train": 0, "eval": 0}
        if self.signal_plan is not None and self.signal_plan[1] == "build":
            os.kill(os.getpid(), self.signal_plan[0])
            self.signal_plan = None

    def forward(self, tokens: torch.Tensor, **kw: Any) -> torch.Tensor:
        if self.oom_above_batch is not None and tokens.size(0) > self.oom_above_batch and self.oom_here:
            raise torch.OutOfMemoryError(f"injected: batch of {tokens.size(0)} > {self.oom_above_batch}")
        if self.signal_plan is not None:
            self.send_planned_signal()
        out = super().forward(tokens=tokens, **kw) * self.logit_gain
        if self.training:
            self.calls += 1
            if self.nan_after_calls is not None and self.calls > self.nan_after_calls:
                out = out * float("nan")
        return out

    def send_planned_signal(self) -> None:
        sig, where, n = self.signal_plan
        self.signal_calls["train" if self.training else "eval"] += 1
        if self.signal_calls[where] == n and self.training == (where == "train"):
            os.kill(os.getpid(), sig)  # the handler runs at once, mid-forward: the update is not over


def signal_plan(value: str | None) -> tuple[int, str, int] | None:
    """(signal, 'train' | 'eval', N) from XDPX_TEST_SIGNAL, or None (also on another process than RANK)."""
    if not value:
        return None
    name, where, n, *rank = value.split(":")
    if rank and int(rank[0]) != int(os.environ.get("RANK", "0")):
        return None
    assert where in ("train", "eval", "import", "build"), value
    return getattr(signal, name), where, int(n)


_plan = signal_plan(os.environ.get("XDPX_TEST_SIGNAL"))
if _plan is not None and _plan[1] == "import":
    os.kill(os.getpid(), _plan[0])
