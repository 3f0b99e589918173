"""When to evaluate, when to stop, what to keep: small objects the loop asks, each with its state.

Every stateful policy has ``state_dict`` / ``load_state_dict`` and is saved in the training state, so a
resumed run takes the same decisions as one never interrupted.
"""

from __future__ import annotations

import math
from typing import Any


class EvalSchedule:
    """Evaluate every ``eval_interval`` updates (``multiplier`` times less often up to
    ``warmup`` updates), or at the end of every epoch (``per_epoch``), and always at the end.
    ``eval_interval: -1`` without per_epoch: only at the end. Stateless."""

    def __init__(self, eval_interval: int, warmup: int = 0, multiplier: int = 6, per_epoch: bool = False) -> None:
        self.interval, self.warmup, self.multiplier = eval_interval, warmup, multiplier
        self.per_epoch = per_epoch

    def due_at_epoch_end(self) -> bool:
        return self.per_epoch

    def due(self, num_updates: int) -> bool:
        if self.per_epoch or self.interval <= 0 or num_updates <= 0:
            return False
        interval = self.interval * self.multiplier if num_updates <= self.warmup else self.interval
        return num_updates % interval == 0


class EarlyStopping:
    """Tracks the best score; asks to stop after ``tolerance`` evaluations without a new best, never
    before update ``min_steps``."""

    def __init__(self, tolerance: int | None, ascending: bool, min_steps: int = 0) -> None:
        self.tolerance, self.ascending, self.min_steps = tolerance, ascending, min_steps
        self.best_score: float | None = None
        self.best_step: int | None = None
        self.evals_without_improvement = 0
        self.last_step = 0  # the update of the latest evaluation

    def is_better(self, score: float) -> bool:
        if self.best_score is None:
            return not math.isnan(score)
        return score > self.best_score if self.ascending else score < self.best_score

    def update(self, score: float, step: int) -> bool:
        """Record an evaluation; True when it is a new best."""
        self.last_step = step
        if self.is_better(score):
            self.best_score, self.best_step = score, step
            self.evals_without_improvement = 0
            return True
        self.evals_without_improvement += 1
        return False

    @property
    def should_stop(self) -> bool:
        return (self.tolerance is not None and self.evals_without_improvement >= self.tolerance
                and self.last_step >= self.min_steps)

    def state_dict(self) -> dict[str, Any]:
        return {"best_score": self.best_score, "best_step": self.best_step,
                "evals_without_improvement": self.evals_without_improvement, "last_step": self.last_step}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best_score, self.best_step = state["best_score"], state["best_step"]
        self.evals_without_improvement = state["evals_without_improvement"]
        self.last_step = state.get("last_step", 0)  # states saved before min_steps existed


class LossLimit:
    """``max_loss``: training stops once an update's mean training loss exceeds this (a diverging run);
    None: never. Stateless: a resumed run redoes the updates since its last save and meets the same loss."""

    def __init__(self, max_loss: float | None) -> None:
        self.max_loss = max_loss
        self.message: str | None = None

    @property
    def exceeded(self) -> bool:
        return self.message is not None

    def check(self, loss: float, step: int) -> None:
        if self.max_loss is not None and self.message is None and loss > self.max_loss:
            self.message = (f"training loss {loss:.4g} at update {step} exceeds max_loss {self.max_loss:g}: "
                            "stopping unstable training (lower learning_rate, set clip_norm, or raise max_loss)")


class SavePolicy:
    """Which weights checkpoints to write after an evaluation, and which earlier ones to delete.

    save: write at each evaluation; save_above_score: only when the score beats it; save_best_only:
    keep only the best; save_last_only: keep only the latest; both: the best and the latest;
    keep_last: the ``keep_last`` latest and the best; keep_best: the ``keep_best`` best by score (and
    the latest, or the ``keep_last`` latest with both).
    """

    def __init__(self, save: bool, best_only: bool = False, last_only: bool = False,
                 above_score: float | None = None, ascending: bool = True, keep_last: int | None = None,
                 keep_best: int | None = None) -> None:
        self.save, self.best_only, self.last_only, self.keep_last = save, best_only, last_only, keep_last
        self.keep_best = keep_best
        self.above_score, self.ascending = above_score, ascending
        self.saved: list[int] = []  # steps whose checkpoint exists
        self.best_step: int | None = None  # the best step that was saved
        self.scores: dict[int, float] = {}  # step -> major metric of the saved checkpoints (keep_best)

    def should_save(self, score: float | None, is_best: bool, final: bool = False) -> bool:
        if not self.save:
            return False
        if self.above_score is not None and score is not None:
            above = score > self.above_score if self.ascending else score < self.above_score
            if not above:
                return False
        if self.best_only and not self.last_only:
            return is_best or score is None
        return True

    def record(self, step: int, is_best: bool, score: float | None = None) -> list[int]:
        """Note a written checkpoint (``score``: its major metric, None without evaluation); return the
        steps whose checkpoints are no longer wanted."""
        if step not in self.saved:
            self.saved.append(step)
        if score is not None and not math.isnan(score):
            self.scores[step] = score
        if is_best:
            self.best_step = step
        keep = set(self.saved)
        if self.best_only or self.last_only:
            keep = set()
            if self.best_only and self.best_step is not None:
                keep.add(self.best_step)
            if self.last_only or self.best_step is None:
                keep.add(step)
        elif self.keep_best is not None:
            keep = set(self.saved[-(self.keep_last or 1):]) | set(self.best_steps())
        elif self.keep_last is not None:
            keep = set(self.saved[-self.keep_last:]) | ({self.best_step} if self.best_step is not None else set())
        dropped = [s for s in self.saved if s not in keep]
        self.saved = [s for s in self.saved if s in keep]
        self.scores = {s: v for s, v in self.scores.items() if s in keep}
        return dropped

    def best_steps(self) -> list[int]:
        """The ``keep_best`` saved steps with the best scores, best first (the earlier step wins a tie,
        as early stopping's best does)."""
        sign = -1.0 if self.ascending else 1.0
        ranked = sorted((s for s in self.saved if s in self.scores), key=lambda s: (sign * self.scores[s], s))
        return ranked[: self.keep_best or 0]

    def state_dict(self) -> dict[str, Any]:
        return {"saved": list(self.saved), "best_step": self.best_step,
                "scores": {str(s): v for s, v in self.scores.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.saved, self.best_step = list(state["saved"]), state["best_step"]
        self.scores = {int(s): v for s, v in state.get("scores", {}).items()}
