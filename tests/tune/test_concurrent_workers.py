"""x-tune workers started together on one fresh study, as ``x-tune tune.hjson &`` typed three times starts
them, on SQLite and on a real PostgreSQL server (a fresh database each: its tables do not exist yet): the
study is created once, holds exactly max_trials trials, no two with the same configuration, every worker
exits 0 and results.tsv lists every trial once. The workers are separate processes released at the same
instant (worker_launcher.py); their trials are stand-ins that report a score through the storage, so
that five fresh studies per backend stay cheap. One launcher run per backend starts every study."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from tune_helpers import REPO, write_study

LAUNCHER = Path(__file__).with_name("worker_launcher.py")
STUDIES = 5  # fresh studies per case: one race lost in any of them fails the test
FINITE_SPACE = {"num_filters": {"type": "int", "values": [4, 8], "step": 4},
                "dropout": {"type": "categorical", "values": [0.0, 0.2]}}


def launch(root: Path, studies: list[dict[str, Any]]) -> None:
    """Run each study's workers at once (the studies one after another); store their exit codes in it."""
    jobs = root / "jobs.json"
    jobs.write_text(json.dumps({"stand_in_trials": True, "studies": [
        {"tune": str(s["tune"]), "workers": s["workers"], "logs": str(s["root"] / "logs")} for s in studies]}))
    # this checkout first (the module-scoped fixtures run before conftest's per-test PYTHONPATH)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(LAUNCHER), str(jobs)], capture_output=True, text=True, timeout=400,
                          cwd=REPO, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    for study, codes in zip(studies, json.loads(done.stdout.strip().splitlines()[-1])):
        study["codes"] = codes


def new_study(root: Path, reviews: Path, workers: int, storage: str | None = None, name: str = "x-tune",
              **tune: Any) -> dict[str, Any]:
    path = write_study(root, reviews, storage=storage or ..., study_name=name, min_ref=0, **tune)
    url = storage or f"sqlite:///{root / 'study' / 'study.db'}"
    return {"root": root, "tune": path, "workers": workers, "url": url, "name": name}


def problems(study: dict[str, Any], max_trials: int) -> list[str]:
    """What went wrong in one study: workers that failed, trials over budget or repeated, results.tsv."""
    import optuna

    logs = [p.read_text() for p in sorted((study["root"] / "logs").glob("worker_*.txt"))]
    errors = [line for log in logs for line in log.splitlines() if "error" in line.lower()][:2]
    found = [] if study["codes"] == [0] * study["workers"] else [f"worker exit codes {study['codes']}: {errors}"]
    trials = optuna.load_study(study_name=study["name"], storage=study["url"]).trials
    if len(trials) != max_trials:
        over = sum(1 for t in trials if t.system_attrs.get("xdpx_over_budget"))
        found.append(f"{len(trials)} trials in the study ({over} over budget), max_trials {max_trials}")
    if {t.state.name for t in trials} != {"COMPLETE"}:
        found.append(f"trial states {[t.state.name for t in trials]}")
    configs = [json.dumps(t.params, sort_keys=True) for t in trials]
    if len(set(configs)) != len(configs):
        found.append(f"the same configuration in several trials: {sorted(configs)}")
    table = study["root"] / "study" / "results.tsv"
    rows = table.read_text().strip().splitlines()[1:] if table.exists() else []
    listed = sorted(int(r.split("\t")[0]) for r in rows if r.split("\t")[1] == "complete")
    if listed != [t.number for t in trials]:
        found.append(f"results.tsv lists the complete trials {listed}, the study holds {[t.number for t in trials]}")
    started = sorted(int(n) for log in logs for n in re.findall(r"x-tune: trial (\d+) starts: ", log))
    if started != [t.number for t in trials]:
        found.append(f"trials started {started}")  # each one once, in one worker
    return [f"study {study['root'].name}: {p}" for p in found]


@pytest.fixture(scope="module")
def sqlite_studies(reviews: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """Three workers x 5 fresh studies; two workers (one trial at a time) x 5; three workers on a space of
    4 configurations with max_trials 6. SQLite in each study's save_dir, as x-tune makes it by default."""
    root = tmp_path_factory.mktemp("tune_sqlite_race")
    cases = {
        "three": [new_study(root / f"three_{i}", reviews, 3, parallel_runs=2, max_trials=4) for i in range(STUDIES)],
        "two": [new_study(root / f"two_{i}", reviews, 2, parallel_runs=1, max_trials=2) for i in range(STUDIES)],
        "finite": [new_study(root / "finite", reviews, 3, space=FINITE_SPACE, parallel_runs=2, max_trials=6)],
    }
    launch(root, [s for studies in cases.values() for s in studies])
    return cases


@pytest.fixture(scope="module")
def postgresql_studies(reviews: Path, tmp_path_factory: pytest.TempPathFactory,
                       postgres_url: str) -> list[dict[str, Any]]:
    import psycopg

    root = tmp_path_factory.mktemp("tune_postgresql_race")
    studies = []
    for i in range(STUDIES):
        database = f"tune_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(postgres_url, autocommit=True) as connection:
            connection.execute(f"CREATE DATABASE {database}")
        url = postgres_url.rsplit("/", 1)[0] + "/" + database
        studies.append(new_study(root / f"three_{i}", reviews, 3, storage=url, name=f"race-{i}", parallel_runs=2,
                                 max_trials=4))
    launch(root, studies)
    return studies


def test_three_workers_on_fresh_sqlite_studies(sqlite_studies: dict[str, list[dict[str, Any]]]) -> None:
    assert [p for study in sqlite_studies["three"] for p in problems(study, 4)] == []


def test_three_workers_on_fresh_postgresql_studies(postgresql_studies: list[dict[str, Any]]) -> None:
    assert [p for study in postgresql_studies for p in problems(study, 4)] == []


def test_two_workers_create_one_fresh_sqlite_study_at_once(sqlite_studies: dict[str, list[dict[str, Any]]]) -> None:
    assert [p for study in sqlite_studies["two"] for p in problems(study, 2)] == []


def test_a_finite_space_runs_each_configuration_once(sqlite_studies: dict[str, list[dict[str, Any]]]) -> None:
    """4 configurations, max_trials 6: the workers stop, exit 0, when every configuration is in the study."""
    [study] = sqlite_studies["finite"]
    assert problems(study, 4) == []
    logs = [p.read_text() for p in (study["root"] / "logs").glob("worker_*.txt")]
    assert any("the search space has 4 configuration(s) and the study tried every one" in log for log in logs)
