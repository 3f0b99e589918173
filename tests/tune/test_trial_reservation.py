"""The pieces that keep concurrent x-tune workers apart, without training: the sampler seeded by the trial
number the storage gives (reproducible in one process, different for two workers that saw the same
study), no configuration twice in a finite space, the storage lock, and the creation race retried."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from xdpx.errors import UserError
from xdpx.tune.locking import storage_lock
from xdpx.tune.sampling import SpaceExhausted, space_size, taken_configs
from xdpx.tune.study import build_sampler, is_creation_race

SPACE = {"learning_rate": FloatDistribution(1e-3, 3e-2, log=True), "num_filters": IntDistribution(4, 12, step=4),
         "dropout": CategoricalDistribution([0.0, 0.2])}
FINITE = {"num_filters": IntDistribution(4, 12, step=4), "dropout": CategoricalDistribution([0.0, "json:[2, 3]"]),
          "scale": FloatDistribution(0.5, 1.0, step=0.25)}


@pytest.fixture(autouse=True)
def quiet() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def ask(study: optuna.Study, tuner: str, seed: int, space: dict) -> optuna.Trial:
    """What the runner does under the storage lock: a sampler that knows the study's configurations."""
    study.sampler = build_sampler(tuner, seed, space, taken_configs(study.trials, space))
    return study.ask(space)


@pytest.mark.parametrize("tuner", ["random", "tpe"])
def test_one_process_draws_trial_n_with_seed_plus_n(tuner: str) -> None:
    """A single worker's trials are what they were before workers were made safe: trial n is drawn by
    Optuna's sampler seeded with seed + n (TPE past its 10 random startup trials too)."""
    study = optuna.create_study(direction="maximize")
    for n in range(14):
        trial = ask(study, tuner, 7, SPACE)
        alone = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=7 + n)
                                    if tuner == "tpe" else optuna.samplers.RandomSampler(seed=7 + n))
        alone.add_trials(study.trials[:-1])
        assert trial.number == n and trial.params == alone.ask(SPACE).params
        study.tell(trial, trial.params["learning_rate"])


def test_two_workers_that_saw_the_same_study_draw_different_values(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'study.db'}"
    optuna.create_study(study_name="s", storage=url, direction="maximize")
    # both load the study while it is empty (the old seed, seed + trials seen, was the same for both)
    workers = [optuna.load_study(study_name="s", storage=url, sampler=build_sampler("random", 1)) for _ in range(2)]
    first, second = (w.ask(SPACE) for w in workers)
    assert (first.number, second.number) == (0, 1) and first.params != second.params


@pytest.mark.parametrize("tuner", ["random", "tpe"])
def test_a_finite_space_gives_each_configuration_once_then_stops(tuner: str) -> None:
    assert space_size(FINITE) == 3 * 2 * 3 and space_size(SPACE) is None
    study = optuna.create_study(direction="maximize")
    for _ in range(18):
        trial = ask(study, tuner, 3, FINITE)
        study.tell(trial, float(trial.params["num_filters"]))
    assert len(taken_configs(study.trials, FINITE)) == 18
    with pytest.raises(SpaceExhausted, match="all 18 configurations"):
        ask(study, tuner, 3, FINITE)


def test_the_storage_lock_keeps_workers_apart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'study.db'}"
    inside, overlaps = [], []

    def worker() -> None:
        for _ in range(5):
            with storage_lock(url, "study:s:trials"):
                inside.append(1)
                overlaps.append(len(inside))
                time.sleep(0.01)
                inside.pop()

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert overlaps == [1] * 15 and (tmp_path / "study.db.lock").exists()
    with storage_lock(url, "study:s:outputs"), pytest.raises(RuntimeError, match="taken twice"):
        with storage_lock(url, "study:s:trials"):  # one lock file: nesting would wait for itself
            pass


def hold(url: str, scope: str) -> tuple[threading.Thread, threading.Event]:
    """Another worker holding the lock ``scope`` (until the returned event is set)."""
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with storage_lock(url, scope):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    assert held.wait(10)
    return thread, release


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_lock_held_too_long_is_a_clear_error(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    url = f"sqlite:///{tmp_path / 'study.db'}" if backend == "sqlite" else request.getfixturevalue("postgres_url")
    thread, release = hold(url, "study:s:trials")
    try:
        with pytest.raises(UserError, match="'study:s:trials' .* was held by another worker for more than 0 s"):
            with storage_lock(url, "study:s:trials", timeout=0.3):
                pass
        if backend == "postgresql":  # one advisory lock per scope (SQLite's scopes share one file)
            with storage_lock(url, "study:s:outputs", timeout=0.3):
                pass
    finally:
        release.set()
        thread.join()
    with storage_lock(url, "study:s:trials", timeout=0.3):  # released with its holder
        pass


def test_creation_races_are_told_from_real_errors() -> None:
    from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

    race = [OperationalError("CREATE TABLE studies", {}, Exception("table studies already exists")),
            IntegrityError("INSERT", {}, Exception("UNIQUE constraint failed: alembic_version.version_num")),
            ProgrammingError("CREATE TABLE", {}, Exception('relation "studies" already exists'))]
    real = [OperationalError("connect", {}, Exception("connection refused")),
            ProgrammingError("CREATE TABLE", {}, Exception("permission denied for schema public"))]
    assert [is_creation_race(e) for e in race + real] == [True, True, True, False, False]
