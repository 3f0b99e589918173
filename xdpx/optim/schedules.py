"""Learning-rate schedules: pure functions of ``num_updates``, the number of updates already done.

The trainer calls ``scheduler.step_update(optimizer, num_updates)`` before each optimizer step, so the
first update uses ``lr(0)``. Nothing but the update counter is needed to resume a schedule exactly.
``total_updates`` (given by the trainer: max_update, or what max_epoch amounts to) sets the length of
the decaying schedules.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from xdpx.config.options import Option
from xdpx.config.ranges import above, at_least, in_range
from xdpx.optim import lr_schedulers

WARMUP_STEPS = Option(
    "warmup_steps", int | float, default=0,
    validate=at_least(0, kind=int) | in_range(0, 1, high_open=True, kind=float),
    doc="updates of linear warmup; a float in [0, 1) is a fraction of the total number of updates "
        "(0.1: the first 10%)",
)
DIV_FACTOR = Option(
    "div_factor", float, default=25.0, validate=above(1),
    doc="the schedule starts (and, for one_cycle, ends) at learning_rate / div_factor",
)


class LRScheduler:
    """Base: ``lr(num_updates) = learning_rate * factor(num_updates)``; no state beyond the arguments."""

    options: list[Any] = []

    def __init__(self, args: Any, total_updates: int) -> None:
        self.peak_lr = args.learning_rate
        self.total_updates = max(1, int(total_updates))
        warmup = args.get("warmup_steps", 0)
        self.warmup_updates = int(warmup * self.total_updates) if isinstance(warmup, float) else warmup

    def factor(self, num_updates: int) -> float:
        return 1.0

    def lr(self, num_updates: int) -> float:
        return self.peak_lr * self.factor(num_updates)

    def step_update(self, optimizer: torch.optim.Optimizer, num_updates: int) -> float:
        """Set the lr of every parameter group for the next update; return it."""
        lr = self.lr(num_updates)
        for group in optimizer.param_groups:
            group["lr"] = lr * group.get("lr_scale", 1.0)  # lr_scale: see xdpx.optim.base.parameter_groups
        return lr

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing to restore: the schedule is a function of the update counter."""

    def linear_warmup(self, num_updates: int) -> float:
        """0 -> 1 over the warmup; the first update already gets 1/warmup_updates of the peak."""
        return min(1.0, (num_updates + 1) / self.warmup_updates)


@lr_schedulers.register("constant")
class Constant(LRScheduler):
    """learning_rate throughout."""


@lr_schedulers.register("warmup_constant")
class WarmupConstant(LRScheduler):
    """Linear warmup from 0 to learning_rate over warmup_steps, then constant."""

    options = [WARMUP_STEPS]

    def factor(self, num_updates: int) -> float:
        return self.linear_warmup(num_updates) if num_updates < self.warmup_updates else 1.0


@lr_schedulers.register("linear_decay")
class LinearDecay(LRScheduler):
    """Linear warmup from 0 over warmup_steps, then linear decay to 0 at the last update (BERT's schedule)."""

    options = [WARMUP_STEPS]

    def factor(self, num_updates: int) -> float:
        if num_updates < self.warmup_updates:
            return self.linear_warmup(num_updates)
        remaining = self.total_updates - num_updates
        return max(0.0, remaining / max(1, self.total_updates - self.warmup_updates))


@lr_schedulers.register("exponential_decay")
class ExponentialDecay(LRScheduler):
    """Warmup from learning_rate / div_factor, then x decay_rate every decay_steps updates (a staircase)."""

    options = [
        WARMUP_STEPS,
        Option("decay_rate", float, default=0.95, validate=in_range(0, 1, low_open=True),
               doc="the lr is multiplied by this every decay_steps updates"),
        Option("decay_steps", int, default=1000, validate=at_least(1),
               doc="updates between two decays"),
        DIV_FACTOR,
    ]

    def __init__(self, args: Any, total_updates: int) -> None:
        super().__init__(args, total_updates)
        self.decay_rate, self.decay_steps = args.decay_rate, args.decay_steps
        self.initial = 1.0 / args.div_factor

    def factor(self, num_updates: int) -> float:
        if num_updates < self.warmup_updates:
            return self.initial + (1.0 - self.initial) * num_updates / self.warmup_updates
        return self.decay_rate ** ((num_updates - self.warmup_updates) // self.decay_steps)


def anneal(start: float, end: float, fraction: float, strategy: str, power: float = 1.0) -> float:
    """From ``start`` (fraction 0) to ``end`` (fraction 1) along a linear, cosine or polynomial curve."""
    if strategy == "linear":
        return start + (end - start) * fraction
    if strategy == "cosine":
        return end + (start - end) * (1.0 + math.cos(math.pi * fraction)) / 2.0
    return end + (start - end) * (1.0 - fraction) ** power


@lr_schedulers.register("one_cycle")
class OneCycle(LRScheduler):
    """Up from learning_rate / div_factor to learning_rate over warmup_steps, then annealed back down to
    learning_rate / div_factor at the last update (Smith & Topin, 2018)."""

    options = [
        WARMUP_STEPS,
        Option("anneal_strategy", str, default="linear", choices=["linear", "cosine", "polynomial"],
               doc="shape of both the rise and the fall",
               children={"polynomial": [Option("anneal_p", float, default=1.0, validate=above(0),
                                               doc="power of the polynomial annealing curve")]}),
        Option("div_factor", float, default=600.0, validate=above(1),
               doc="the schedule starts and ends at learning_rate / div_factor"),
    ]

    def __init__(self, args: Any, total_updates: int) -> None:
        super().__init__(args, total_updates)
        self.strategy, self.power = args.anneal_strategy, args.get("anneal_p", 1.0)
        self.initial = 1.0 / args.div_factor

    def factor(self, num_updates: int) -> float:
        if num_updates < self.warmup_updates:
            return anneal(self.initial, 1.0, num_updates / self.warmup_updates, self.strategy, self.power)
        fraction = (num_updates - self.warmup_updates) / max(1, self.total_updates - self.warmup_updates)
        return anneal(1.0, self.initial, min(1.0, fraction), self.strategy, self.power)
