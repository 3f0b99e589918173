"""Start x-tune workers as ``x-tune tune.hjson &`` typed N times starts them, N at the same instant, cheaply.

    python worker_launcher.py jobs.json    # prints one JSON list: the exit codes of each study's workers

jobs.json: ``{"studies": [{"tune": path, "workers": 3, "logs": folder}, ...], "stand_in_trials": true}``.
The studies run one after another; each study's workers are separate processes, forked from this one
after it imported x-tune (an x-tune process spends ~4 s importing torch and the rest on 2 cores: forking
makes 30 workers cost one import), then all released at the same moment, each running the x-tune
command (``run_chain(["x-tune", path])``, what the console script runs) with its output in
``logs/worker_<w>.txt``.

With ``stand_in_trials`` a trial is not an x-train process but a stand-in in the worker: it waits a
moment (so the workers' trials overlap) and reports a score made from its values through the storage,
as the trainer's reporter does. What these tests exercise (creating the study, reserving trials,
sampling, writing the outputs) happens in x-tune, not in the trial; tests/tune/test_study.py and
test_resume_and_workers.py run real x-train trials.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import sys
import tempfile
import time
from typing import Any

import xdpx.tune.command  # noqa: F401
import xdpx.tune.results  # noqa: F401
from xdpx.cli import run_chain
from xdpx.tune import runner
from xdpx.tune.runner import StudyRunner

START_DELAY = 0.5  # seconds between forking a study's workers and releasing them together


def stand_in_score(params: dict[str, Any]) -> float:
    """A score that depends on the trial's values, so the study has a best trial."""
    return round(sum(float(v) if isinstance(v, (int, float)) else len(str(v)) for v in params.values()) % 1, 6)


def stand_in_train(self: StudyRunner, trial: Any, config_path: str, folder: str, slot: int) -> tuple[int, list[str]]:
    time.sleep(random.uniform(0.05, 0.4))
    os.makedirs(folder, exist_ok=True)
    trial.set_user_attr("best_score", stand_in_score(trial.params))
    trial.set_user_attr("best_step", 4)
    return 0, []


def warm_up(tune: str) -> None:
    """Import and initialise here what every worker would otherwise load itself after the release (x-tune's
    plan, Optuna's tables and migrations, the PostgreSQL driver, matplotlib's PNG writer), so that the
    workers reach the storage together. Nothing stays open: the workers fork from this process."""
    from matplotlib.figure import Figure
    from optuna.storages import RDBStorage
    from sqlalchemy import create_engine

    with contextlib.redirect_stdout(io.StringIO()):  # --dry: the plan, its options and the model registry
        run_chain(["x-tune", tune, "--dry"])
    with tempfile.TemporaryDirectory() as folder:
        RDBStorage(f"sqlite:///{folder}/warm.db").engine.dispose()
    create_engine("postgresql://warm@127.0.0.1:1/warm").dispose()  # loads the dialect and psycopg, connects not
    Figure().savefig(io.BytesIO(), format="png")


def run_worker(tune: str, log: str, start: float) -> None:
    """In the forked child: the x-tune command on ``tune``, its output in ``log``; never returns."""
    code = 1
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        random.seed()  # the stand-in's waits differ between workers
        time.sleep(max(0.0, start - time.time()))
        code = run_chain(["x-tune", tune])
    except BaseException as error:  # noqa: BLE001 - shown in the worker's log, the exit code says it failed
        print(f"worker_launcher: {type(error).__name__}: {error}", flush=True)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main(argv: list[str]) -> int:
    with open(argv[0]) as f:
        jobs = json.load(f)
    if jobs.get("stand_in_trials"):
        StudyRunner._train = stand_in_train  # type: ignore[method-assign]
        runner.POLL_SECONDS = 0.2  # a worker with no trial left waits for the others' (seconds-long) trials
    warm_up(jobs["studies"][0]["tune"])
    codes = []
    for study in jobs["studies"]:
        os.makedirs(study["logs"], exist_ok=True)
        start = time.time() + START_DELAY
        pids = []
        for w in range(study["workers"]):
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:
                run_worker(study["tune"], os.path.join(study["logs"], f"worker_{w}.txt"), start)
            pids.append(pid)
        codes.append([os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids])
    print(json.dumps(codes))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
