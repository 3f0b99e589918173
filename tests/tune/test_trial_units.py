"""Small pieces of the trial runner and reporter: which GPUs trials get, and which evaluations count as
"at" an assessment point (eval_deviation), and the step they are reported at."""

from __future__ import annotations

import optuna
import pytest

from xdpx.tune.reporter import PRUNED_ATTR, TrialReporter, report_step
from xdpx.tune.runner import visible_gpus
from xdpx.tune.study import build_pruner


@pytest.mark.parametrize("visible, gpus", [("0,1", ["0", "1"]), ("3", ["3"]), ("", []), ("-1", [])])
def test_trials_use_the_visible_gpus(monkeypatch: pytest.MonkeyPatch, visible: str, gpus: list[str]) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert visible_gpus() == gpus


def reporter(deviation: int | None) -> TrialReporter:
    r = TrialReporter.__new__(TrialReporter)  # no storage needed for this decision
    r.step_samples, r.eval_deviation, r.assess_points, r.last_update, r.reported = 64, deviation, (100, 50), 440, set()
    return r


def test_evaluations_count_only_near_an_assessment_point() -> None:
    r = reporter(deviation=200)
    assert r.comparable(100 * 64) and r.comparable(150 * 64 + 200) and r.comparable(150 * 64 - 200)
    assert not r.comparable(125 * 64)  # halfway between two assessments: 1600 samples off
    assert reporter(deviation=None).comparable(125 * 64)


# examples/tune on the reviews: the epoch's partial batch (28,098 = 439 x 64 + 2 reviews) is shuffled in among
# the others, so from update 100 on a trial has seen 62 samples fewer than updates x 64 (valid.log.tsv: step
# 150, samples 9538 = 149.03 x 64)
@pytest.mark.parametrize("samples, step", [(3200, 50), (6338, 100), (9538, 150), (25538, 400),
                                           (28098, 439),  # the end of training (440 updates): not 450
                                           (125 * 64, None)])  # halfway between two points: not compared
def test_evaluations_are_reported_at_their_assessment_point(samples: int, step: int | None) -> None:
    assert report_step(samples, 64, 50, 50, deviation=1600 - 1, last_update=440) == step
    assert report_step(samples, 64, 50, 50, deviation=None) == round(samples / 64)


def test_a_trial_short_of_samples_is_judged_at_the_rung_not_an_interval_later() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    spec = {"kind": "successive_halving", "min_resource": 50, "interval": 50, "max_resource": 440, "keep": 0.34,
            "min_ref": 0}
    study = optuna.create_study(direction="maximize", pruner=build_pruner(spec))
    for value in (0.9, 0.8):  # two trials ahead, better at every rung
        trial = study.ask()
        for step in (50, 100, 150):
            trial.report(value, step)
            trial.should_prune()
        study.tell(trial, value)
    r = reporter(deviation=1600)
    r.assess_points, r.trial = (50, 50), study.ask()
    assert not r.after_evaluation(3200, 0.95, 0.95, 50)  # the best at update 50: goes on
    assert not r.after_evaluation(6338, 0.5, 0.95, 50)
    assert r.after_evaluation(9538, 0.5, 0.95, 50)  # 149.03 updates: judged at rung 150, and stopped
    assert r.trial.user_attrs[PRUNED_ATTR] == 150
    assert list(r.trial.storage.get_trial(r.trial._trial_id).intermediate_values) == [50, 100, 150]
