"""How x-submit shapes a job, without a cluster: loops become a job array (each task one run), x-tune workers
need a storage every node reaches, cluster options and pass-through flags reach the script, the signal and
requeue directives, and the torchrun wrapper's reading of the ranks' exit codes."""

from __future__ import annotations

import io
import json
import subprocess
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from submit_helpers import TINY, submit, write_config

from xdpx.chain import run_chain
from xdpx.submit.launch import requeue_exit


def grid(path: Path, data_dir: Path) -> Path:
    base = {k: v for k, v in TINY.items() if k not in ("learning_rate", "num_filters")}
    loops = [[{"learning_rate": 1e-3}, {"learning_rate": 3e-3}], [{"num_filters": 4}, {"num_filters": 8}]]
    path.write_text(json.dumps({"__parent__": ["${data_dir}/meta", *loops], "data_dir": str(data_dir),
                                "save_dir": "runs/lr${learning_rate}.f${num_filters}", **base}))
    return path


def tune_files(folder: Path, data_dir: Path, **tune: object) -> None:
    write_config(folder / "train.hjson", data_dir, "unused")
    (folder / "space.hjson").write_text(json.dumps({"learning_rate": {"type": "float", "values": [1e-3, 1e-2]}}))
    (folder / "tune.hjson").write_text(json.dumps({"space_config": "./space", "base_config": "./train",
                                                   "save_dir": "study", "assess_interval": 4, "max_trials": 4,
                                                   **tune}))


def one_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("x-submit: error: ")]
    assert len(lines) == 1, err
    return lines[0]


def test_a_grid_becomes_a_job_array_with_one_run_per_task(reviews, tmp_path, monkeypatch, capsys):
    grid(tmp_path / "grid.hjson", reviews)
    assert submit(monkeypatch, tmp_path, "--max-parallel", "2", "--dry", "x-train", "grid.hjson") == 0
    script = capsys.readouterr().out
    assert "#SBATCH --array=0-3%2\n" in script
    assert f"#SBATCH --output={tmp_path}/slurm_jobs/x-train.grid.%A_%a.log\n" in script
    assert '-m xdpx.submit.chain --run-index "$SLURM_ARRAY_TASK_ID" x-train grid.hjson' in script
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0


def test_an_array_task_runs_the_run_of_its_index_in_loop_order(reviews, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = str(grid(tmp_path / "grid.hjson", reviews))
    shown = io.StringIO()
    with redirect_stdout(shown):
        assert run_chain(["x-train", path, "--dry"], run_index=2) == 0  # the first loop varies fastest
    assert "runs/lr0.001.f8" in shown.getvalue() and "lr0.003" not in shown.getvalue()
    with redirect_stdout(io.StringIO()):
        assert run_chain(["x-train", path, "--dry"], run_index=4) == 2


@pytest.mark.parametrize(("argv", "message"), [
    (["--workers", "2", "x-tune", "tune.hjson"], "the study's storage is SQLite (sqlite:///"),
    (["--nodes", "2", "x-tune", "tune.hjson"], "use --workers 2"),
    (["--workers", "2", "x-train", "train.hjson"], "the chain has no x-tune step"),
    (["--max-parallel", "2", "x-train", "train.hjson"], "no config of the chain has loops"),
    (["x-train", "train.hjson", "x-train", "grid.hjson"], "step 1 (x-train train.hjson) is one run, beside configs"),
])
def test_job_shapes_that_cannot_work_are_refused_before_the_queue(argv, message, reviews, tmp_path, monkeypatch,
                                                                  capsys):
    tune_files(tmp_path, reviews)
    grid(tmp_path / "grid.hjson", reviews)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert submit(monkeypatch, tmp_path, *argv) == 2
    line = one_error(capsys.readouterr().err)
    assert message in line
    if "SQLite" in message:  # why, and what to set
        assert "tune.hjson: key 'storage'" in line and "locks do not hold across machines" in line
        assert "storage: postgresql://USER@HOST:5432/DATABASE" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written


def test_x_tune_workers_on_postgresql_become_an_array_of_workers(reviews, tmp_path, monkeypatch, capsys):
    tune_files(tmp_path, reviews, storage="postgresql://tuner@db.example:5432/studies")
    assert submit(monkeypatch, tmp_path, "--workers", "3", "--dry", "x-tune", "tune.hjson") == 0
    script = capsys.readouterr().out
    assert "#SBATCH --array=0-2\n" in script and "--run-index" not in script
    assert "-m xdpx.submit.chain x-tune tune.hjson" in script


def test_cluster_options_and_pass_through_flags_reach_the_script(reviews, tmp_path, monkeypatch, capsys):
    write_config(tmp_path / "train.hjson", reviews, "runs/a")
    assert submit(monkeypatch, tmp_path, "--gpus-per-node", "a100:4", "--constraint", "a100&ib", "--account", "nlp",
                  "--qos", "high", "--reservation", "maint,dev", "--sbatch=--mail-type=END",
                  "--sbatch=--comment=a b; $(x)", "--signal-grace", "300", "--dry", "x-train", "train.hjson") == 0
    script = capsys.readouterr().out
    for directive in ("--gpus-per-node=a100:4", "--constraint='a100&ib'", "--account=nlp", "--qos=high",
                      "--reservation=maint,dev", "--mail-type=END", "--comment='a b; $(x)'", "--signal=USR1@300",
                      "--requeue"):
        assert f"#SBATCH {directive}\n" in script
    assert "--nproc_per_node=4" in script  # one process per GPU of the type asked for
    assert 'scontrol requeue "$SLURM_JOB_ID"' in script


def test_no_signal_and_no_requeue(reviews, tmp_path, monkeypatch, capsys):
    write_config(tmp_path / "train.hjson", reviews, "runs/a")
    assert submit(monkeypatch, tmp_path, "--signal-grace", "0", "--no-requeue", "--dry", "x-train", "train.hjson") == 0
    script = capsys.readouterr().out
    assert "#SBATCH --no-requeue\n" in script and "--signal=" not in script and "scontrol requeue" not in script
    assert "the job was submitted with --no-requeue: submit it again to continue from that state" in script


@pytest.mark.parametrize(("flag", "instead"), [("--sbatch=--array=0-9", "a config with loops"),
                                               ("--sbatch=--time=5", "use --time instead"),
                                               ("--sbatch=--output=x.log", "use --log-dir instead")])
def test_pass_through_refuses_the_flags_x_submit_writes(flag, instead, tmp_path, monkeypatch, capsys):
    assert submit(monkeypatch, tmp_path, flag, "x-train", "a.hjson") == 2
    line = one_error(capsys.readouterr().err)
    assert "x-submit sets --" in line and instead in line


@pytest.mark.parametrize(("codes", "requeue"), [([3, 3], True), ([3], True), ([3, -15], True), ([3, -9], True),
                                                ([1, 3], False), ([-15], False), ([1], False), ([3, 2], False)])
def test_the_wrapper_passes_exit_3_on_only_when_the_ranks_stopped_for_it(codes, requeue):
    assert requeue_exit(codes) is requeue
