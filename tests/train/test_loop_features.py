"""Several valid sets, evaluation per epoch, max_eval_steps, keep_last_checkpoints, callbacks (a user_dir
one with state, and mlflow against a real local store): each as documented, and all of them exact across
SIGKILL and resume."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from train_helpers import assert_same_weights, final_weights, train, write_config

from xdpx.train.callbacks.mlflow import STORE_FILE

HERE = Path(__file__).resolve().parent
RUNNER = HERE / "kill_runner.py"
USER_DIR = HERE / "callback_components"

# 240 samples / 16 = 15 updates per epoch: evaluations after update 5 (asked by the callback), 15, 30, 45
FEATURES = {"valid_subset": ["dev", "test"], "eval_interval": -1, "eval_per_epoch": True, "max_eval_steps": 2,
            "valid_batch_size": 8, "keep_last_checkpoints": 2, "user_dir": str(USER_DIR),
            "callbacks": ["recorder", "mlflow"], "evaluate_after": [5], "resume": True, "viz": False,
            "log_interval": 3}


@pytest.fixture(autouse=True)
def forget_test_callbacks():
    yield
    from xdpx.train.callbacks import callbacks

    callbacks._entries.pop("recorder", None)
    sys.modules.pop("callback_components", None)


def run_runner(config: Path, where: str, n: int) -> int:
    return subprocess.run([sys.executable, str(RUNNER), str(config), where, str(n)], capture_output=True,
                          text=True, timeout=180).returncode


def mlflow_runs(save_dir: Path) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{save_dir / STORE_FILE}")
    experiment = client.get_experiment_by_name("xdpx")
    return client, client.search_runs([experiment.experiment_id])


def metric_history(save_dir: Path, name: str) -> list[tuple[int, float]]:
    client, runs = mlflow_runs(save_dir)
    assert len(runs) == 1, "a resume continues the same MLflow run"
    return [(m.step, m.value) for m in client.get_metric_history(runs[0].info.run_id, name)]


@pytest.fixture(scope="module")
def reference(reviews: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("features")
    config = write_config(root / "train.json", reviews, root / "run", **FEATURES)
    assert run_runner(config, "never", 0) == 0
    return root / "run"


def test_several_valid_sets_per_epoch_evaluation_and_keep_last(reference, reviews):
    from xdpx.viz.runs import read_tsv

    rows = read_tsv(str(reference / "valid.log.tsv"))
    assert [r["step"] for r in rows] == [5, 15, 30, 45]  # the callback's request, then each epoch's end
    assert [r["epoch"] for r in rows] == [1, 1, 2, 3]
    assert {"loss", "accuracy", "test.loss", "test.accuracy", "best_accuracy"} <= set(rows[0])
    best_step = max(rows, key=lambda r: (r["accuracy"], -r["step"]))["step"]
    kept = sorted(int(p.stem.split("-")[1]) for p in reference.glob("checkpoint-*.pt"))
    assert kept == sorted({30, 45, best_step})  # the 2 latest and the best
    log = (reference / "log.txt").read_text(encoding="utf-8")
    assert "eval at update 15 (epoch 1) on dev: loss" in log and "; test: loss" in log

    # x-viz and aggregate_results read the other split's columns
    from xdpx.scripts.aggregate_results import aggregate
    from xdpx.viz.runs import read_run

    run = read_run(str(reference))
    assert run.split_of("test.accuracy") == ("test", "accuracy") and run.split_of("accuracy") == ("dev", "accuracy")
    assert run.lower_is_better("test.loss") and not run.lower_is_better("test.accuracy")
    assert {"test.loss", "test.accuracy"} <= set(run.valid_metrics())
    header, row = aggregate([str(reference)], [], False)
    at_best = next(r for r in rows if r["step"] == best_step)
    assert row[header.index("best_step")] == str(best_step)
    assert float(row[header.index("test.accuracy")]) == pytest.approx(at_best["test.accuracy"], rel=1e-5)

    # max_eval_steps: 2 batches of 8 on each split, the numbers x-eval's evaluation gives
    import contextlib

    from xdpx.data.dataset import open_split
    from xdpx.export.loading import load_run
    from xdpx.runtime.scoring import evaluate

    # the run names this test's user_dir (callback_components): loading it needs consent
    loaded = load_run(str(reference), str(reference / "checkpoint-45.pt"), trust_user_dir=True)
    for split, prefix in (("dev", ""), ("test", "test.")):
        data = open_split(str(reviews), split)
        capped = evaluate(loaded.task, loaded.model, loaded.processor, data, 8, contextlib.nullcontext(), max_steps=2)
        whole = evaluate(loaded.task, loaded.model, loaded.processor, data, 8, contextlib.nullcontext())
        assert rows[-1][prefix + "loss"] == pytest.approx(capped["loss"], rel=1e-5)
        assert capped["loss"] != pytest.approx(whole["loss"], rel=1e-5)


def test_callbacks_see_every_hook_and_mlflow_holds_params_metrics_and_the_run(reference):
    recorded = json.loads((reference / "recorder.json").read_text())
    assert recorded["updates"] == 45 and recorded["status"] == "done"
    assert [step for step, _ in recorded["evaluations"]] == [5, 15, 30, 45]
    assert recorded["saves"] == ["checkpoint-5.pt", "checkpoint-15.pt", "checkpoint-30.pt", "checkpoint-45.pt"]

    client, runs = mlflow_runs(reference)
    run = runs[0]
    assert run.info.status == "FINISHED" and run.data.tags["xdpx.status"] == "done"
    assert run.data.params["learning_rate"] == "0.003" and run.data.params["valid_subset"] == "['dev', 'test']"
    assert "mlflow_tracking_uri" not in run.data.params
    from xdpx.viz.runs import read_tsv

    rows = read_tsv(str(reference / "valid.log.tsv"))
    assert metric_history(reference, "test.accuracy") == [(r["step"], pytest.approx(r["test.accuracy"], rel=1e-5))
                                                          for r in rows]
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id, "run")}
    assert {"run/valid.log.tsv", "run/args.py", "run/log.txt", "run/recorder.json"} <= artifacts
    assert not any(p.endswith(".pt") or STORE_FILE in p for p in artifacts)


def test_features_stay_exact_across_sigkill_and_resume(reviews, reference, tmp_path):
    config = write_config(tmp_path / "train.json", reviews, tmp_path / "run", **FEATURES)
    assert run_runner(config, "update", 20) == -signal.SIGKILL  # mid-epoch 2
    # during the evaluation at the end of epoch 2 (each evaluation: 2 dev + 2 test batches)
    assert run_runner(config, "eval", 3) == -signal.SIGKILL
    assert run_runner(config, "never", 0) == 0
    run = tmp_path / "run"
    # Bit for bit, as the plain loop (tests/train/test_resume.py). Every process here has the same CPU thread
    # count (state.pt records it): another count rounds reductions differently.
    from xdpx.models.checkpoints import load_torch

    threads = {load_torch(str(r / "state.pt"))["counters"]["cpu_threads"] for r in (run, reference)}
    assert len(threads) == 1, threads
    assert_same_weights(final_weights(run), final_weights(reference))
    assert (run / "valid.log.tsv").read_text() == (reference / "valid.log.tsv").read_text()
    assert (run / "checkpoints.json").read_text() == (reference / "checkpoints.json").read_text()
    assert sorted(p.name for p in run.glob("checkpoint-*.pt")) == sorted(p.name for p in reference.glob("checkpoint-*.pt"))
    recorded, expected_record = json.loads((run / "recorder.json").read_text()), json.loads((reference / "recorder.json").read_text())
    assert recorded["updates"] == expected_record["updates"] == 45  # the callback's state came back from state.pt
    assert recorded["saves"] == expected_record["saves"]
    assert recorded["loss_sum"] == expected_record["loss_sum"]
    assert [step for step, _ in recorded["evaluations"]] == [5, 15, 30, 45]
    history = metric_history(run, "accuracy")  # one MLflow run, no step logged twice
    assert [step for step, _ in history] == [5, 15, 30, 45]
    assert history == metric_history(reference, "accuracy")


def git(repo: Path, *arguments: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com",
                           *arguments], check=True, capture_output=True, text=True).stdout.strip()


def test_a_callback_can_stop_training_and_the_run_records_its_code_version(reviews, tmp_path):
    # the user_dir lives in a git work tree with an uncommitted change
    repo = tmp_path / "repo"
    shutil.copytree(USER_DIR, repo / USER_DIR.name, ignore=shutil.ignore_patterns("__pycache__"))
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "callbacks")
    commit = git(repo, "rev-parse", "HEAD")
    with open(repo / USER_DIR.name / "__init__.py", "a") as f:
        f.write("# an uncommitted change\n")

    config = write_config(tmp_path / "train.json", reviews, tmp_path / "run", user_dir=str(repo / USER_DIR.name),
                          callbacks=["recorder"], evaluate_after=[5, 7], stop_after_evaluations=3, eval_interval=5,
                          viz=False)
    assert train(config) == 0
    run = tmp_path / "run"
    log = (run / "log.txt").read_text(encoding="utf-8")
    assert "a callback stopped training: 3 evaluations seen" in log and "| stopped: 10 updates" in log
    recorded = json.loads((run / "recorder.json").read_text())
    # 5: scheduled and asked for (one evaluation), 7: asked for, 10: scheduled, then the stop
    assert recorded["status"] == "stopped" and [step for step, _ in recorded["evaluations"]] == [5, 7, 10]
    from xdpx.scripts.aggregate_results import aggregate

    assert aggregate([str(tmp_path)], [], False)[1][-1] == "stopped early"

    line = f"user_dir {commit} (dirty) in {repo.resolve()}"
    assert "code version: " in log and line in log
    header = (run / "args.py").read_text(encoding="utf-8").splitlines()
    assert f"# code version: {line}" in header
    from xdpx.config.writers import read_args

    assert read_args(str(run / "args.py"))["callbacks"] == ["recorder"]  # still a plain literal


def test_unknown_callback_and_valid_split_are_config_errors(reviews, tmp_path, capsys):
    config = write_config(tmp_path / "train.json", reviews, tmp_path / "run", callbacks=["mlfow"],
                          valid_subset=["dev", "tset"])
    assert train(config) == 2
    err = capsys.readouterr().err
    assert "unknown callback 'mlfow'. Did you mean 'mlflow'?" in err
    config = write_config(tmp_path / "train.json", reviews, tmp_path / "run", valid_subset=["dev", "tset"])
    assert train(config) == 2
    assert "key 'valid_subset': no split 'tset'" in capsys.readouterr().err
