"""What x-train --dry (and every run, before any work) rejects, each with the key and the fix."""

from __future__ import annotations

import json

import pytest
from train_helpers import BASE, write_config

from xdpx.cli import run_chain


def dry(path, capsys) -> tuple[int, str]:
    code = run_chain(["x-train", str(path), "--dry"])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_a_valid_config_passes_and_writes_nothing(reviews, tmp_path, capsys):
    code, out = dry(write_config(tmp_path / "t.hjson", reviews, tmp_path / "run"), capsys)
    assert code == 0 and "training on ['train']: 240 samples, effective batch 16" in out
    assert not (tmp_path / "run").exists()


def test_data_dir_without_meta(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    config = {"data_dir": str(tmp_path / "empty"), "save_dir": str(tmp_path / "run"), "processor": "single",
              "tokenizer": "char_zh", "loader": "single", "max_len": 10, **BASE}
    (tmp_path / "t.hjson").write_text(json.dumps(config))
    code, out = dry(tmp_path / "t.hjson", capsys)
    assert code == 2 and "holds no meta.hjson: run x-prepro" in out


def test_existing_save_dir_needs_resume_overwrite_or_auto_suffix(reviews, tmp_path, capsys):
    (tmp_path / "run").mkdir()  # a run written before the .xdpx-run marker: args.py beside its logs
    (tmp_path / "run" / "args.py").write_text("{}")
    (tmp_path / "run" / "train.log.tsv").write_text("epoch\tstep\n")
    code, out = dry(write_config(tmp_path / "t.hjson", reviews, tmp_path / "run"), capsys)
    assert code == 2 and "holds a run: set resume: true" in out
    for option in ("resume", "overwrite", "auto_suffix"):
        code, out = dry(write_config(tmp_path / "t.hjson", reviews, tmp_path / "run", **{option: True}), capsys)
        assert code == 0, out
    assert "run.1" in out  # auto_suffix says where it would write


def test_neither_max_epoch_nor_max_update(reviews, tmp_path, capsys):
    code, out = dry(write_config(tmp_path / "t.hjson", reviews, tmp_path / "run", max_epoch=...), capsys)
    assert code == 2 and "set max_epoch or max_update" in out


def test_batch_larger_than_the_training_set(reviews, tmp_path, capsys):
    code, out = dry(write_config(tmp_path / "t.hjson", reviews, tmp_path / "run", batch_size=128, update_freq=2),
                    capsys)
    assert code == 2 and "= 256 is larger than the training set (240 samples)" in out


@pytest.mark.parametrize("key,value", [("train_subset", "shard*"), ("train_subset", ["train", "extra"]),
                                       ("valid_subset", "validation")])
def test_subsets_that_match_nothing(reviews, tmp_path, capsys, key, value):
    code, out = dry(write_config(tmp_path / "t.hjson", reviews, tmp_path / "run", **{key: value}), capsys)
    assert code == 2 and f"key '{key}'" in out and "available: dev, test, train" in out


def test_unwritable_save_dir(reviews, tmp_path, capsys):
    (tmp_path / "a_file").write_text("not a folder")
    code, out = dry(write_config(tmp_path / "t.hjson", reviews, tmp_path / "a_file" / "run"), capsys)
    assert code == 2 and "cannot write to" in out


def test_pretrained_model_alias_without_checkpoints(reviews, tmp_path, capsys):
    (tmp_path / "old").mkdir()
    code, out = dry(write_config(tmp_path / "t.hjson", reviews, tmp_path / "run",
                                 pretrained_model=f"{tmp_path}/old/<best>"), capsys)
    assert code == 2 and "holds no checkpoint for <best>" in out


def test_a_failed_check_stops_a_real_run_before_any_work(reviews, tmp_path, capsys):
    config = write_config(tmp_path / "t.hjson", reviews, tmp_path / "run", valid_subset="nope")
    assert run_chain(["x-train", str(config)]) == 2
    assert not (tmp_path / "run").exists()
