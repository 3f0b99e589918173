"""Small pieces of the trial runner and reporter: which GPUs trials get, and which evaluations count as
"at" an assessment point (eval_deviation)."""

from __future__ import annotations

import pytest

from xdpx.tune.reporter import TrialReporter
from xdpx.tune.runner import visible_gpus


@pytest.mark.parametrize("visible, gpus", [("0,1", ["0", "1"]), ("3", ["3"]), ("", []), ("-1", [])])
def test_trials_use_the_visible_gpus(monkeypatch: pytest.MonkeyPatch, visible: str, gpus: list[str]) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert visible_gpus() == gpus


def reporter(deviation: int | None) -> TrialReporter:
    r = TrialReporter.__new__(TrialReporter)  # no storage needed for this decision
    r.step_samples, r.eval_deviation, r.assess_points = 64, deviation, (100, 50)
    return r


def test_evaluations_count_only_near_an_assessment_point() -> None:
    r = reporter(deviation=200)
    assert r.comparable(100 * 64) and r.comparable(150 * 64 + 200) and r.comparable(150 * 64 - 200)
    assert not r.comparable(125 * 64)  # halfway between two assessments: 1600 samples off
    assert reporter(deviation=None).comparable(125 * 64)
