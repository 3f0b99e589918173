"""How tune.hjson's keys become Optuna pruners: the original XDPX's linear culling (percentile), and min_ref
holding back any pruning until enough trials ran to the end. In-memory studies, no training."""

from __future__ import annotations

import optuna
import pytest

from xdpx.tune.study import build_pruner, hyperband_brackets, hyperband_rungs

SPEC = {"min_resource": 4, "interval": 4, "max_resource": 16, "keep": 0.5, "min_ref": 1}


def study_with(kind: str, finished: list[dict[int, float]], **spec: float) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", pruner=build_pruner({**SPEC, "kind": kind, **spec}))
    for values in finished:
        trial = study.ask()
        for step, value in values.items():
            trial.report(value, step)
            trial.should_prune()  # as the trainer asks: successive halving records its rungs then
        study.tell(trial, max(values.values()))
    return study


def pruned_at(study: optuna.Study, values: dict[int, float]) -> int | None:
    trial = study.ask()
    for step, value in values.items():
        trial.report(value, step)
        if trial.should_prune():
            return step
    return None


def test_percentile_culls_from_assess_start_step_every_assess_interval() -> None:
    finished = [{2: 0.9, 4: 0.9, 8: 0.9, 12: 0.9}, {2: 0.8, 4: 0.8, 8: 0.8, 12: 0.8}]
    study = study_with("percentile", finished, keep=0.5, min_resource=8)
    assert pruned_at(study, {2: 0.1, 4: 0.1, 6: 0.1, 8: 0.1}) == 8  # not before assess_start_step
    assert pruned_at(study, {8: 0.95, 12: 0.95}) is None  # the best half goes on


def test_min_ref_holds_pruning_until_enough_trials_completed() -> None:
    finished = [{4: 0.9, 8: 0.9, 16: 0.9}]
    assert pruned_at(study_with("successive_halving", finished, min_ref=1), {4: 0.1, 8: 0.1}) == 4
    assert pruned_at(study_with("successive_halving", finished, min_ref=2), {4: 0.1, 8: 0.1}) is None


@pytest.mark.parametrize("kind, keep, rungs", [("hyperband", 0.5, [4, 8]), ("successive_halving", 0.34, [4, 12]),
                                               ("percentile", 0.8, [4, 8, 12]), ("none", 0.5, [])])
def test_assessment_steps(kind: str, keep: float, rungs: list[int]) -> None:
    assert hyperband_rungs({**SPEC, "kind": kind, "keep": keep}) == rungs


@pytest.mark.parametrize("keep, start, end, expected", [
    (0.5, 4, 16, [(0.4, [4, 8]), (0.3, [8]), (0.3, [])]),  # 16 / 4 = 2^2: the last bracket prunes nothing
    (1 / 3, 50, 440, [(0.6, [50, 150]), (0.4, [150])]),  # examples/tune: 440 / 50 < 3^2, two brackets
    (1 / 3, 48, 440, [(9 / 17, [48, 144, 432]), (5 / 17, [144, 432]), (3 / 17, [432])]),
])
def test_hyperband_brackets_are_optunas(keep: float, start: int, end: int, expected: list) -> None:
    spec = {**SPEC, "kind": "hyperband", "keep": keep, "min_resource": start, "max_resource": end}
    brackets = hyperband_brackets(spec)
    assert [(round(share, 6), rungs) for share, rungs in brackets] == [(round(s, 6), r) for s, r in expected]
    # what --dry prints is what Optuna builds: as many brackets, with these shares of the trials
    study = study_with("hyperband", [{start: 0.5, end - 1: 0.9}], **{k: v for k, v in spec.items() if k != "kind"})
    inner = study.pruner.pruner
    assert inner._n_brackets == len(brackets)
    total = sum(inner._trial_allocation_budgets)
    assert [b / total for b in inner._trial_allocation_budgets] == pytest.approx([s for s, _ in brackets])
