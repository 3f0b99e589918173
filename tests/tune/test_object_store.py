"""A study whose save_dir is on an object store (moto's S3 server on 127.0.0.1): trials write their runs
there, and so do the outputs; the storage is a database (here an SQLite file, a server for several
machines)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tune_helpers import tune, write_study

from xdpx import io


def test_study_on_s3(reviews: Path, tmp_path: Path, s3_root: str, s3_endpoint: str,
                     monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "io.json"  # the trial processes reach the same S3 server through it
    config.write_text(json.dumps({"s3": {"endpoint_url": s3_endpoint}}))
    monkeypatch.setenv("XDPX_IO_CONFIG", str(config))
    save_dir = f"{s3_root}/study"
    path = write_study(tmp_path, reviews, save_dir=save_dir, storage=f"sqlite:///{tmp_path / 'study.db'}",
                       max_trials=1, parallel_runs=1, base={"max_update": 8})
    code = tune(path)
    if code != 0 and io.exists(f"{save_dir}/trial_0/console.txt"):  # show why the trial failed
        with io.open(f"{save_dir}/trial_0/console.txt") as f:
            print(f.read())
    assert code == 0
    assert io.exists(f"{save_dir}/trial_0/args.py") and io.exists(f"{save_dir}/trial_0/valid.log.tsv")
    with io.open(f"{save_dir}/results.tsv") as f:
        rows = f.read().splitlines()
    assert rows[1].split("\t")[:2] == ["0", "complete"]
    assert io.exists(f"{save_dir}/overview.png") and io.exists(f"{save_dir}/best_config.hjson")
