"""kill -9 fuzz: x-train SIGKILLed at seeded random points (random moments, halfway through checkpoint and
state writes, between the fsync and the rename of any file, after updates, during evaluation), then resumed,
again and again. After every kill no visible file is corrupt; every chain of kills and resumes ends bitwise
equal to the run that was never interrupted.

XDPX_KILL_FUZZ_SEED=N reproduces a failing CI run (the seed is in every assertion message);
XDPX_KILL_FUZZ_POINTS sets how many kill points one run tests (default 24).
"""

from __future__ import annotations

import ast
import json
import os
import random
import time
from pathlib import Path

import pytest
from forked_runs import train_forked
from train_runs import assert_same_weights, state_weights, train_config

from xdpx.models.checkpoints import load_torch

KILL_POINTS = int(os.environ.get("XDPX_KILL_FUZZ_POINTS", "24"))
SEED = int(os.environ.get("XDPX_KILL_FUZZ_SEED", str(time.time_ns() % 1_000_000)))
# every policy with state in play: best/last checkpoints, early-stopping counter, lr warmup and decay,
# dropout (step randomness), a log interval that does not divide the eval interval
RUN = {"resume": True, "max_update": 30, "eval_interval": 5, "log_interval": 3, "save_best_only": True,
       "save_last_only": True, "tolerance": 4}
# kind -> the n of kill_runner.install(kind, n), drawn so that most draws are reached in a resumed run
KINDS = {
    "moment": lambda rng: rng.randint(30, 900),  # milliseconds after the process starts
    "checkpoint": lambda rng: rng.randint(1, 2),  # halfway through the n-th checkpoint-*.pt write
    "state": lambda rng: rng.randint(1, 2),  # halfway through the n-th state.pt write
    "commit": lambda rng: rng.randint(1, 24),  # synced temp file, no rename yet: any file of the run
    "update": lambda rng: rng.randint(1, 8),
    "eval": lambda rng: rng.randint(1, 10),  # the n-th validation batch (4 per evaluation)
}


def assert_nothing_corrupt(run: Path, context: str) -> None:
    """Every visible file of the run reads completely (temp files are hidden and swept on resume)."""
    for path in sorted(run.iterdir()):
        name = path.name
        if name.startswith("."):
            # .xdpx-lock: the writer lock the killed run held (the next run takes it over)
            assert name in (".xdpx-run", ".xdpx-lock") or name.endswith(".tmp"), f"{context}: unexpected {name}"
            continue
        if name.endswith(".pt"):
            assert isinstance(load_torch(str(path)), dict), f"{context}: {name}"
        elif name == "checkpoints.json":
            index = json.loads(path.read_text())
            for key in ("best", "last"):
                assert index[key] is None or (run / index[key]).exists(), f"{context}: {key} names a missing file"
        elif name.endswith(".tsv"):
            text = path.read_text()  # empty until the first row
            assert text == "" or text.endswith("\n"), f"{context}: {name} ends in a partial line"
            widths = {len(line.split("\t")) for line in text.splitlines()}
            assert len(widths) <= 1, f"{context}: {name} has rows of {widths} fields"
        elif name == "args.py":
            assert isinstance(ast.literal_eval(path.read_text()), dict), context
        elif name == "log.txt":
            path.read_text(encoding="utf-8")


def assert_same_run(run: Path, reference: Path, context: str) -> None:
    assert_same_weights(state_weights(run), state_weights(reference))
    for name in ("valid.log.tsv", "checkpoints.json"):
        assert (run / name).read_text() == (reference / name).read_text(), f"{context}: {name} differs"
    rows = [[line.split("\t")[:4] for line in (folder / "train.log.tsv").read_text().splitlines()]
            for folder in (run, reference)]
    assert rows[0] == rows[1], f"{context}: train.log.tsv differs"
    names = [sorted(p.name for p in folder.glob("*.pt")) for folder in (run, reference)]
    assert names[0] == names[1], f"{context}: checkpoints differ"
    assert not list(run.glob(".*.tmp")), f"{context}: temp files left"


@pytest.fixture(scope="module")
def reference(reviews, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("uninterrupted")
    assert train_forked(train_config(root / "train.hjson", reviews, root / "run", **RUN)) == 0
    return root / "run"


def test_sigkill_at_random_points_then_resume_is_bitwise_the_uninterrupted_run(reviews, reference, tmp_path):
    rng = random.Random(SEED)
    kinds = list(KINDS)
    killed: list[str] = []
    chain, history = 0, []
    config = None
    finished = True
    while len(killed) < KILL_POINTS or not finished:
        if finished:  # a new chain of kills in a fresh run directory
            chain += 1
            run = tmp_path / f"run{chain}"
            config = train_config(tmp_path / f"train{chain}.hjson", reviews, run, **RUN)
            history = []
        if len(killed) >= KILL_POINTS:
            where, n = "never", 0  # enough kill points: resume to the end
        else:
            if not history:
                rng.shuffle(kinds)
            where = kinds[len(history) % len(kinds)]
            n = KINDS[where](rng)
        history.append(f"{where} {n}")
        context = f"seed {SEED}, chain {chain}: {' -> '.join(history)}"
        code = train_forked(config, where, n)
        if code == -9:
            killed.append(f"{where} {n}")
            assert_nothing_corrupt(run, context)
            finished = False
        else:
            assert code == 0, f"{context}: exit {code}"
            assert_same_run(run, reference, context)
            finished = True
    counts = {kind: sum(k.startswith(kind) for k in killed) for kind in KINDS}
    print(f"kill fuzz seed {SEED}: {len(killed)} kills in {chain} chains, by kind {counts}")
    assert len(killed) >= KILL_POINTS, f"seed {SEED}: {counts}"


def test_a_kill_while_the_run_marker_commits_leaves_a_folder_that_resumes(reviews, reference, tmp_path):
    """The first file a run commits is its marker: killed between its fsync and its rename, the folder holds
    only the marker's temp file. It is still x-train's folder: resume starts the run (seed 405487 of CI)."""
    run = tmp_path / "run"
    config = train_config(tmp_path / "train.hjson", reviews, run, **RUN)
    assert train_forked(config, "commit", 1) == -9
    left = [p.name for p in run.iterdir() if p.name != ".xdpx-lock"]  # the killed run's writer lock stays
    assert len(left) == 1 and left[0].startswith("..xdpx-run.") and left[0].endswith(".tmp"), left
    assert train_forked(config) == 0
    assert_same_run(run, reference, "kill at commit 1, then resume")
