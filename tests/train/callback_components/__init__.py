"""A user_dir for the callback tests: a callback with state that requests evaluations and stops training."""

from __future__ import annotations

import json
import os
from typing import Any

from xdpx.config.options import Option
from xdpx.train.callbacks import Callback, RunInfo, callbacks


@callbacks.register("recorder")
class Recorder(Callback):
    """Counts updates and sums their losses (state kept in state.pt), asks for an evaluation after the
    updates listed in evaluate_after, stops after stop_after_evaluations evaluations, and writes what it
    saw to save_dir/recorder.json at the end."""

    options = [
        Option("evaluate_after", list[int], default=[], doc="updates after which to request an evaluation"),
        Option("stop_after_evaluations", int, default=None, doc="request a stop after this many evaluations"),
    ]

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.updates, self.loss_sum, self.evaluations, self.saves = 0, 0.0, [], []

    def on_update(self, run: RunInfo, stats: dict[str, Any]) -> None:
        self.updates += 1
        self.loss_sum += stats["loss"]
        if run.num_updates in self.args.evaluate_after:
            run.control.request_evaluation()

    def on_evaluation(self, run: RunInfo, row: dict[str, Any]) -> None:
        self.evaluations.append([row["step"], row["accuracy"]])
        if self.args.stop_after_evaluations and len(self.evaluations) >= self.args.stop_after_evaluations:
            run.control.request_stop(f"{len(self.evaluations)} evaluations seen")

    def on_save(self, run: RunInfo, path: str) -> None:
        self.saves.append(os.path.basename(path))

    def on_train_end(self, run: RunInfo, status: str) -> None:
        if run.is_main:
            with open(os.path.join(run.save_dir, "recorder.json"), "w") as f:
                json.dump({**self.state_dict(), "status": status}, f)

    def state_dict(self) -> dict[str, Any]:
        return {"updates": self.updates, "loss_sum": self.loss_sum, "evaluations": self.evaluations,
                "saves": self.saves}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.updates, self.loss_sum = state["updates"], state["loss_sum"]
        self.evaluations, self.saves = state["evaluations"], state["saves"]
