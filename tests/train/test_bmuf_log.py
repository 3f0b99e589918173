"""log.txt says whether BMUF is on, and logs every block sync with its count, update and time."""

from __future__ import annotations

import re

from train_helpers import train, write_config

COMMON = {"dropout": 0.0, "max_epoch": 1, "eval_interval": 10, "warmup_steps": 0, "viz": False, "cpu": True,
          "batch_size": 8, "use_bmuf": True, "global_sync_iter": 4, "warmup_iterations": 2}


def test_bmuf_run_logs_that_it_is_on_and_each_block_sync(reviews, tmp_path):
    # 240 samples in updates of 2 x 8: 15 updates; the warmup broadcast at 2, syncs at 4, 8, 12 and at the
    # evaluations (10, and 15 at the end)
    config = write_config(tmp_path / "bmuf.hjson", reviews, tmp_path / "run", distributed_world_size=2, **COMMON)
    assert train(config) == 0
    log = (tmp_path / "run" / "log.txt").read_text()
    assert ("use_bmuf: BMUF is on: 2 processes each train their own copy and sync every 4 updates "
            "(block_momentum 0.875, block_lr 1.0), after 2 warmup updates") in log
    syncs = re.findall(r"BMUF: (.+?), sync (\d+), at update (\d+): (\d+\.\d+)s", log)
    assert [(what, int(n), int(step)) for what, n, step, _ in syncs] == [
        ("warmup broadcast of rank 0's weights", 1, 2), ("block sync", 2, 4), ("block sync", 3, 8),
        ("block sync", 4, 10), ("block sync", 5, 12), ("block sync", 6, 15)]
    assert all(float(seconds) < 60 for *_, seconds in syncs)


def test_bmuf_with_one_process_says_it_is_off(reviews, tmp_path):
    config = write_config(tmp_path / "one.hjson", reviews, tmp_path / "run", max_update=2, **{
        **COMMON, "max_epoch": ...})
    assert train(config) == 0
    log = (tmp_path / "run" / "log.txt").read_text()
    assert "use_bmuf: one process, so BMUF is off" in log
    assert "BMUF: block sync" not in log
