"""lazy_load while x-prepro still writes later shards: training waits for each, and ends exactly as a run
that found every shard written (real x-prepro runs, the second one in another process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from train_helpers import assert_same_weights, final_weights, train, write_config

from xdpx.cli import run_chain

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples/data/sample/reviews"

# waits until the trainer says it waits, then writes shard train1 with x-prepro
WRITER = """
import sys, time
log, config = sys.argv[1], sys.argv[2]
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    try:
        if "waiting for shard 'train1'" in open(log, encoding="utf-8").read():
            break
    except FileNotFoundError:
        pass
    time.sleep(0.1)
from xdpx.cli import run_chain
sys.exit(run_chain(["x-prepro", config]))
"""


def prepro_config(path: Path, source: Path, data_dir: Path, files: list[str]) -> Path:
    path.write_text(json.dumps({"__parent__": str(REPO / "examples/prepro/reviews_char"), "data_source": str(source),
                                "data_dir": str(data_dir), "data_files": files, "workers": 1}))
    return path


@pytest.fixture
def first_shard(tmp_path: Path) -> tuple[Path, Path]:
    """(data_dir holding train0 and dev only, the x-prepro config that adds train1)."""
    source = tmp_path / "source"
    source.mkdir()
    lines = (SAMPLE / "train.txt").read_text(encoding="utf-8").splitlines(keepends=True)
    (source / "train0.txt").write_text("".join(lines[:120]), encoding="utf-8")
    (source / "train1.txt").write_text("".join(lines[120:]), encoding="utf-8")
    (source / "dev.txt").write_text((SAMPLE / "dev.txt").read_text(encoding="utf-8"), encoding="utf-8")
    data_dir = tmp_path / "data"
    assert run_chain(["x-prepro", str(prepro_config(tmp_path / "p0.json", source, data_dir,
                                                    ["train0.txt", "dev.txt"]))]) == 0
    return data_dir, prepro_config(tmp_path / "p1.json", source, data_dir, ["train1.txt"])


LAZY = {"train_subset": ["train0", "train1"], "lazy_load": True, "max_epoch": ..., "max_update": 16,
        "eval_interval": -1, "viz": False}


def test_lazy_load_waits_for_the_shard_x_prepro_writes_later(first_shard, tmp_path):
    data_dir, add_train1 = first_shard
    config = write_config(tmp_path / "train.json", data_dir, tmp_path / "run", **LAZY, lazy_load_wait=60)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / "run" / "log.txt"), str(add_train1)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert train(config) == 0
    finally:
        _, errors = writer.communicate(timeout=120)
    assert writer.returncode == 0, errors
    log = (tmp_path / "run" / "log.txt").read_text(encoding="utf-8")
    assert "lazy_load: waiting for shard 'train1'" in log and "lazy_load: shard 'train1' is ready" in log
    assert "done: 16 updates, 240 samples" in log  # both shards: 8 updates of 15 + 8 of 15 samples

    # the same run on the now complete data: bit for bit the same weights
    reference = write_config(tmp_path / "reference.json", data_dir, tmp_path / "reference", **LAZY)
    assert train(reference) == 0
    assert "waiting for shard" not in (tmp_path / "reference" / "log.txt").read_text(encoding="utf-8")
    assert_same_weights(final_weights(tmp_path / "run"), final_weights(tmp_path / "reference"))


def test_a_shard_that_never_arrives_stops_with_a_clear_error(first_shard, tmp_path, capsys):
    data_dir, _ = first_shard
    config = write_config(tmp_path / "train.json", data_dir, tmp_path / "run",
                          **{**LAZY, "train_subset": ["train0", "train7"]}, lazy_load_wait=1)
    assert train(config) == 1
    error = capsys.readouterr().err
    assert "shard 'train7' of train_subset did not appear" in error and "within 1s (lazy_load_wait)" in error
    assert "resume: true" in error


def test_shards_still_to_come_need_max_update(first_shard, tmp_path, capsys):
    data_dir, _ = first_shard
    config = write_config(tmp_path / "train.json", data_dir, tmp_path / "run",
                          **{**LAZY, "max_update": ..., "max_epoch": 1})
    assert train(config) == 2
    assert "shards ['train1'] are not written yet" in capsys.readouterr().err
