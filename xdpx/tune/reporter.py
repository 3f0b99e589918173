"""The trainer's side of a tune trial: report the major metric after each evaluation, stop when pruned.

The x-tune runner starts each trial as an ``x-train`` process with :data:`TRIAL_ENV` set to a JSON
description of the trial (storage URL, study, trial id, pruner). The trainer asks
:func:`trial_reporter_from_env` once; without the variable (every ordinary run) it gets None and
nothing changes. The storage URL travels in the environment, never in a file of the run directory.
"""

from __future__ import annotations

import json
import os
from typing import Any

TRIAL_ENV = "XDPX_TUNE_TRIAL"
PRUNED_ATTR = "pruned_at_step"  # a trial user attribute: the trainer stopped because the pruner said so


class TrialReporter:
    """Reports evaluations of one trial to its Optuna study; :meth:`after_evaluation` says whether to stop."""

    def __init__(self, spec: dict[str, Any]) -> None:
        import optuna

        from xdpx.tune.study import build_pruner, open_storage

        self.step_samples = int(spec["step_samples"])  # samples of one base-config update: the report unit
        self.eval_deviation = spec.get("eval_deviation")
        self.assess_points = spec.get("assess_start_step"), spec.get("assess_interval")
        storage = open_storage(spec["storage"], heartbeat_interval=None)
        study = optuna.load_study(study_name=spec["study"], storage=storage,
                                  pruner=build_pruner(spec["pruner"]))
        self.trial = optuna.Trial(study, int(spec["trial_id"]))

    def comparable(self, samples_seen: int) -> bool:
        """Whether an evaluation lies within eval_deviation samples of an assessment point (the steps
        assess_start_step + k * assess_interval, in base-config updates)."""
        start, interval = self.assess_points
        if self.eval_deviation is None or not interval:
            return True
        exact = samples_seen / self.step_samples
        k = max(0, round((exact - start) / interval))
        nearest = (start + k * interval) * self.step_samples
        return abs(samples_seen - nearest) <= self.eval_deviation

    def after_evaluation(self, samples_seen: int, score: float, best_score: float | None,
                         best_step: int | None) -> bool:
        """Report ``score`` at ``samples_seen``; True when the trial is pruned (the trainer stops)."""
        step = round(samples_seen / self.step_samples)
        trial = self.trial
        trial.set_user_attr("best_score", best_score)
        trial.set_user_attr("best_step", best_step)
        trial.set_user_attr("samples_seen", samples_seen)
        if not self.comparable(samples_seen):
            return False
        trial.report(float(score), step)
        if trial.should_prune():
            trial.set_user_attr(PRUNED_ATTR, step)
            return True
        return False


def trial_reporter_from_env() -> TrialReporter | None:
    """The reporter of this process when the x-tune runner started it as a trial, else None."""
    spec = os.environ.get(TRIAL_ENV)
    return TrialReporter(json.loads(spec)) if spec else None
