"""x-train behaviours: run directory, determinism, exact accumulation, auto_ga, precision, bad runs."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile

import torch
from train_helpers import FAULTY, assert_same_weights, final_weights, train, write_config

from xdpx.models.checkpoints import load_weights, resolve_checkpoint
from xdpx.train.loop import Trainer


def test_run_directory_holds_everything_about_the_run(reviews, tmp_path):
    run = tmp_path / "run"
    assert train(write_config(tmp_path / "t.hjson", reviews, run, max_epoch=2)) == 0
    names = {p.name for p in run.iterdir()}
    assert {"args.py", "starter_config.hjson", "log.txt", "train.log.tsv", "valid.log.tsv", "state.pt",
            "snapshot.zip", "vocab.txt", "target_map.txt", "checkpoint-10.pt", "checkpoint-20.pt",
            "checkpoint-30.pt", "checkpoints.json"} <= names
    valid = (run / "valid.log.tsv").read_text().splitlines()
    assert valid[0].split("\t")[:5] == ["epoch", "step", "samples", "loss", "accuracy"]
    assert [row.split("\t")[1] for row in valid[1:]] == ["10", "20", "30"]
    train_rows = (run / "train.log.tsv").read_text().splitlines()
    assert train_rows[0].split("\t")[:8] == ["epoch", "step", "samples", "loss", "grad_norm", "clip_rate", "lr",
                                             "samples_per_s"]
    assert [row.split("\t")[1] for row in train_rows[1:]] == [str(s) for s in range(4, 31, 4)]
    with zipfile.ZipFile(run / "snapshot.zip") as archive:
        members = archive.namelist()
    assert "xdpx/train/loop.py" in members
    assert not any("__pycache__" in m or m.endswith(".pyc") or "credential" in m for m in members)
    assert (run / "vocab.txt").read_text() == (reviews / "vocab.txt").read_text()
    best, last = resolve_checkpoint(f"{run}/<best>"), resolve_checkpoint(f"{run}/<last>")
    assert last.endswith("checkpoint-30.pt") and best.endswith(".pt")


def test_same_config_twice_gives_identical_weights(reviews, tmp_path):
    for name in ("a", "b"):
        assert train(write_config(tmp_path / f"{name}.hjson", reviews, tmp_path / name, max_epoch=1)) == 0
    assert_same_weights(final_weights(tmp_path / "a"), final_weights(tmp_path / "b"))
    assert (tmp_path / "a/valid.log.tsv").read_text() == (tmp_path / "b/valid.log.tsv").read_text()


def test_other_seed_gives_other_weights(reviews, tmp_path):
    for name, seed in (("a", 1), ("b", 2)):
        assert train(write_config(tmp_path / f"{name}.hjson", reviews, tmp_path / name, max_epoch=1, seed=seed)) == 0
    assert not torch.equal(final_weights(tmp_path / "a")["classifier.weight"], final_weights(tmp_path / "b")["classifier.weight"])


def test_accumulation_equals_one_big_batch_including_a_short_last_micro_batch(reviews, tmp_path):
    # 240 samples in updates of 64: the last update has 48 = 32 + a short 16 with update_freq 2
    common = {"dropout": 0.0, "max_epoch": 2, "eval_interval": -1, "log_interval": 1, "warmup_steps": 0}
    runs = {"64x1": {"batch_size": 64, "update_freq": 1}, "32x2": {"batch_size": 32, "update_freq": 2},
            "16x4": {"batch_size": 16, "update_freq": 4}}
    for name, split in runs.items():
        assert train(write_config(tmp_path / f"{name}.hjson", reviews, tmp_path / name, **common, **split)) == 0
    reference = final_weights(tmp_path / "64x1")
    for name in ("32x2", "16x4"):
        weights = final_weights(tmp_path / name)
        for key in reference:
            assert torch.allclose(weights[key], reference[key], rtol=1e-4, atol=1e-6), (name, key)
        losses = [float(r.split("\t")[3]) for r in (tmp_path / name / "train.log.tsv").read_text().splitlines()[1:]]
        expected = [float(r.split("\t")[3]) for r in (tmp_path / "64x1/train.log.tsv").read_text().splitlines()[1:]]
        assert len(losses) == 8 and all(abs(x - y) < 1e-5 for x, y in zip(losses, expected))


def test_auto_ga_halves_the_batch_on_out_of_memory_and_keeps_it_on_resume(reviews, tmp_path):
    common = {"user_dir": str(FAULTY), "model": "faulty_cnn", "dropout": 0.0, "eval_interval": -1,
              "batch_size": 32, "max_epoch": 2, "warmup_steps": 0}
    run = tmp_path / "ga"
    config = write_config(tmp_path / "ga.hjson", reviews, run, **common, oom_above_batch=16, auto_ga=True,
                          resume=True, train_steps=5)
    assert train(config) == 0
    log = (run / "log.txt").read_text()
    assert re.search(r"auto_ga: out of memory at update \d+: batch_size -> 16, update_freq -> 2", log)
    assert train(write_config(tmp_path / "ga.hjson", reviews, run, **common, oom_above_batch=16, auto_ga=True,
                              resume=True)) == 0
    log = (run / "log.txt").read_text()
    assert log.count("auto_ga: out of memory at update") == 1 and "batch_size 16 (auto_ga)" in log
    plain = {**common, "batch_size": 16, "update_freq": 2}
    assert train(write_config(tmp_path / "b.hjson", reviews, tmp_path / "plain", **plain)) == 0
    expected = final_weights(tmp_path / "plain")
    for key, value in final_weights(run).items():
        assert torch.allclose(value, expected[key], rtol=1e-4, atol=1e-6), key


def test_out_of_memory_without_auto_ga_fails(reviews, tmp_path, capsys):
    config = write_config(tmp_path / "t.hjson", reviews, tmp_path / "run", user_dir=str(FAULTY),
                          model="faulty_cnn", oom_above_batch=8)
    assert train(config) == 1
    assert "OutOfMemoryError" in capsys.readouterr().err


def test_bf16_autocast_trains_on_cpu(reviews, tmp_path):
    run = tmp_path / "run"
    assert train(write_config(tmp_path / "t.hjson", reviews, run, bf16=True, max_epoch=1)) == 0
    weights = final_weights(run)
    assert all(v.dtype == torch.float32 for v in weights.values() if v.is_floating_point())
    rows = (run / "valid.log.tsv").read_text().splitlines()
    assert len(rows) == 3 and float(rows[-1].split("\t")[3]) < 10


def test_fp16_loss_scale_under_minimum_stops_and_names_the_parameters(reviews, tmp_path, capsys):
    config = write_config(tmp_path / "t.hjson", reviews, tmp_path / "run", user_dir=str(FAULTY),
                          model="faulty_cnn", fp16=True, logit_gain=1e8, fp16_init_scale=4, min_loss_scale=0.5)
    assert train(config) == 1
    err = capsys.readouterr().err
    assert "min_loss_scale" in err and "classifier.weight" in err
    log = (tmp_path / "run" / "log.txt").read_text()
    assert "loss scale -> 2" in log and "loss scale -> 0.5" in log


def test_nan_loss_stops_with_a_message_and_the_run_stays_resumable(reviews, tmp_path, capsys):
    run = tmp_path / "run"
    common = {"user_dir": str(FAULTY), "model": "faulty_cnn", "resume": True}
    assert train(write_config(tmp_path / "t.hjson", reviews, run, **common, nan_after_calls=24)) == 1
    err = capsys.readouterr().err
    assert "the loss is nan at update 25" in err and "resume: true" in err
    assert train(write_config(tmp_path / "t.hjson", reviews, run, **common)) == 0
    assert "resumed from state.pt: epoch 2, update 20" in (run / "log.txt").read_text()
    reference = tmp_path / "reference"
    assert train(write_config(tmp_path / "r.hjson", reviews, reference, model="faulty_cnn",
                              user_dir=str(FAULTY))) == 0
    assert_same_weights(final_weights(run), final_weights(reference))


def test_early_stopping_and_save_best_only(reviews, tmp_path):
    run = tmp_path / "run"
    config = write_config(tmp_path / "t.hjson", reviews, run, eval_interval=2, tolerance=2, max_epoch=10,
                          major_metric="loss", ascending_metric=False, save_best_only=True, learning_rate=0.05)
    assert train(config) == 0
    rows = [r.split("\t") for r in (run / "valid.log.tsv").read_text().splitlines()[1:]]
    best_step = int(rows[-1][-1])
    assert len(rows) < 75 and int(rows[-1][1]) - best_step == 4  # stopped 2 evaluations after the best
    assert [p.name for p in run.glob("checkpoint-*.pt")] == [f"checkpoint-{best_step}.pt"]
    assert resolve_checkpoint(f"{run}/<best>").endswith(f"checkpoint-{best_step}.pt")


def test_pretrained_model_from_best_of_an_earlier_run(reviews, tmp_path):
    first = tmp_path / "first"
    assert train(write_config(tmp_path / "a.hjson", reviews, first, max_epoch=1)) == 0
    config = write_config(tmp_path / "b.hjson", reviews, tmp_path / "second", max_epoch=1,
                          pretrained_model=f"{first}/<best>")
    from xdpx.cli import resolve_runs

    trainer = Trainer(resolve_runs("x-train", str(config))[0])
    expected = load_weights(f"{first}/<best>")
    for key, value in trainer.module.state_dict().items():
        assert torch.equal(value, expected[key])
    trainer.close()


def test_importing_the_command_imports_no_torch():
    code = "import sys, xdpx.train.command; print([m for m in sys.modules if m == 'torch'])"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "[]"
