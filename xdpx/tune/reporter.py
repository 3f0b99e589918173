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

from xdpx.tune.study import build_pruner, open_storage

TRIAL_ENV = "XDPX_TUNE_TRIAL"
PRUNED_ATTR = "pruned_at_step"  # a trial user attribute: the trainer stopped because the pruner said so


def report_step(samples_seen: int, step_samples: int, start: int | None, interval: int | None,
                deviation: int | None, last_update: int | None = None) -> int | None:
    """The step an evaluation after ``samples_seen`` samples is reported at (in base-config updates), or
    None when it is not reported.

    An evaluation within ``deviation`` samples of an assessment point (start + k x interval) is reported
    *at that point*: the pruners' rungs are those points, and a trial whose updates were a few samples
    short (the epoch's partial batch, shuffled in among the others) would otherwise report at 149
    instead of 150 and be judged at its next evaluation, an interval later. An evaluation further off is not reported (it is not
    comparable with the other trials'). A point at or after the trial's ``last_update`` would judge a
    trial whose training is over, so the evaluation at the end of training is reported where it is
    (439 of 440 updates, not 450). Without ``deviation``: where it is."""
    exact = samples_seen / step_samples
    if deviation is None or not interval or start is None:
        return round(exact)
    k = max(0, round((exact - start) / interval))
    point = start + k * interval
    if abs(samples_seen - point * step_samples) > deviation:
        return None
    if last_update is not None and point >= last_update:
        return round(exact)
    return point


class TrialReporter:
    """Reports evaluations of one trial to its Optuna study; :meth:`after_evaluation` says whether to stop."""

    def __init__(self, spec: dict[str, Any]) -> None:
        import optuna  # lazy: loads optuna

        self.step_samples = int(spec["step_samples"])  # samples of one base-config update: the report unit
        self.eval_deviation = spec.get("eval_deviation")
        self.assess_points = spec.get("assess_start_step"), spec.get("assess_interval")
        self.last_update = spec["pruner"].get("max_resource")  # the updates of a whole trial
        self.reported: set[int] = set()
        storage = open_storage(spec["storage"], heartbeat_interval=None)
        study = optuna.load_study(study_name=spec["study"], storage=storage,
                                  pruner=build_pruner(spec["pruner"]))
        self.trial = optuna.Trial(study, int(spec["trial_id"]))

    def step_of(self, samples_seen: int) -> int | None:
        """The step this evaluation is reported at, None when it is not (see :func:`report_step`)."""
        start, interval = self.assess_points
        return report_step(samples_seen, self.step_samples, start, interval, self.eval_deviation, self.last_update)

    def comparable(self, samples_seen: int) -> bool:
        """Whether an evaluation lies within eval_deviation samples of an assessment point (the steps
        assess_start_step + k * assess_interval, in base-config updates)."""
        return self.step_of(samples_seen) is not None

    def after_evaluation(self, samples_seen: int, score: float, best_score: float | None,
                         best_step: int | None) -> bool:
        """Report ``score`` at ``samples_seen``; True when the trial is pruned (the trainer stops)."""
        trial = self.trial
        trial.set_user_attr("best_score", best_score)
        trial.set_user_attr("best_step", best_step)
        trial.set_user_attr("samples_seen", samples_seen)
        step = self.step_of(samples_seen)
        if step is None or step in self.reported:  # not comparable, or a second evaluation near one point
            return False
        self.reported.add(step)
        trial.report(float(score), step)
        if trial.should_prune():
            trial.set_user_attr(PRUNED_ATTR, step)
            return True
        return False


def trial_reporter_from_env() -> TrialReporter | None:
    """The reporter of this process when the x-tune runner started it as a trial, else None."""
    spec = os.environ.get(TRIAL_ENV)
    return TrialReporter(json.loads(spec)) if spec else None
