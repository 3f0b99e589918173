"""Callbacks: user code the training loop calls at fixed points (the ``callbacks`` option).

A callback is a class registered in :data:`callbacks` (built in: ``mlflow``; your own from ``user_dir``)::

    from xdpx.train.callbacks import Callback, callbacks

    @callbacks.register("stop_at_accuracy")
    class StopAtAccuracy(Callback):
        options = [Option("stop_accuracy", float, default=0.9, doc="...")]

        def on_evaluation(self, run, row):
            if row["accuracy"] >= self.args.stop_accuracy:
                run.control.request_stop(f"accuracy {row['accuracy']:.3f}")

The loop calls the hooks in this order: ``on_train_start`` once per invocation (also after a resume),
``on_update`` after each optimizer update (after its train.log.tsv row), ``on_evaluation`` after each
evaluation's valid.log.tsv row, ``on_save`` after a checkpoint is written, ``on_train_end`` once at the
end (done, stopped or paused). Hooks run on every process (``run.is_main`` says which one may write), so
a decision to stop or evaluate is the same on all of them. A callback influences training only through
``run.control``: ``request_stop(reason)`` ends training after the current step (like early stopping:
a final evaluation and save follow), ``request_evaluation()`` evaluates after the current update.

``state_dict`` / ``load_state_dict`` keep a callback's state in state.pt with the rest of the training
state, so a resumed run calls its callbacks with the state they had (bit-for-bit resume).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xdpx.registry import Registry

callbacks = Registry("callback", modules=("xdpx.train.callbacks.mlflow",))


class Control:
    """What callbacks may ask of the loop; the loop reads and clears it."""

    def __init__(self) -> None:
        self.stop_reason: str | None = None
        self.evaluation_requested = False

    def request_stop(self, reason: str) -> None:
        """End training after the current update or evaluation (a final evaluation and save follow)."""
        self.stop_reason = self.stop_reason or reason

    def request_evaluation(self) -> None:
        """Evaluate (and maybe save) after the current update, whatever eval_interval says."""
        self.evaluation_requested = True


@dataclass(frozen=True)
class RunInfo:
    """What a hook may read about the run; a fresh one at each call."""

    args: Any
    save_dir: str
    is_main: bool
    epoch: int
    num_updates: int
    total_updates: int
    samples_seen: int
    best_score: float | None
    best_step: int | None
    model: Any
    control: Control


class Callback:
    """Base class of callbacks: every hook does nothing; override those you need."""

    options: list[Any] = []

    def __init__(self, args: Any) -> None:
        self.args = args

    def on_train_start(self, run: RunInfo) -> None:
        """Training starts (or resumes: ``run.num_updates`` > 0)."""

    def on_update(self, run: RunInfo, stats: dict[str, Any]) -> None:
        """After an optimizer update; ``stats``: loss (summed), sample_size, nsamples, grad_norm, lr."""

    def on_evaluation(self, run: RunInfo, row: dict[str, Any]) -> None:
        """After an evaluation; ``row`` is its valid.log.tsv row (epoch, step, metrics, best so far)."""

    def on_save(self, run: RunInfo, path: str) -> None:
        """After the weights checkpoint ``path`` was written (checkpoints.json names it already)."""

    def on_train_end(self, run: RunInfo, status: str) -> None:
        """At the end of this invocation; ``status``: done, stopped or paused."""

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


class Callbacks:
    """The callbacks of a run, called in the order of the ``callbacks`` option."""

    def __init__(self, names: list[str], args: Any) -> None:
        self.items = [(name, callbacks.get(name)(args)) for name in names]
        self.control = Control()

    def call(self, hook: str, run_info: Callable[[], RunInfo], *arguments: Any) -> None:
        """Call ``hook`` of every callback; ``run_info`` makes the RunInfo, only when there are callbacks
        (the loop calls this after every update)."""
        if not self.items:
            return
        run = run_info()
        for _name, callback in self.items:
            getattr(callback, hook)(run, *arguments)

    def take_evaluation_request(self) -> bool:
        requested, self.control.evaluation_requested = self.control.evaluation_requested, False
        return requested

    @property
    def stop_reason(self) -> str | None:
        return self.control.stop_reason

    def state_dict(self) -> dict[str, Any]:
        return {"stop_reason": self.control.stop_reason,
                "callbacks": {name: callback.state_dict() for name, callback in self.items}}

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        state = state or {}
        self.control.stop_reason = state.get("stop_reason")
        saved = state.get("callbacks", {})
        for name, callback in self.items:
            if name in saved:
                callback.load_state_dict(saved[name])
