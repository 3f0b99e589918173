"""A config on S3 (moto) whose __parent__ is a relative path resolves against the remote folder."""

from __future__ import annotations

import xdpx.io as xio
from xdpx.config.loader import load_config


def put(url: str, text: str) -> None:
    with xio.open(url, "w") as f:
        f.write(text)


def test_remote_child_inherits_relative_remote_parent(s3_root):
    put(f"{s3_root}/configs/base.hjson", "{\n  learning_rate: 1e-3\n  batch_size: 16\n  model: cls_cnn\n}\n")
    put(f"{s3_root}/common/data.hjson", "{\n  data_dir: s3://bucket/data\n  batch_size: 8\n}\n")
    put(
        f"{s3_root}/configs/exp/child.hjson",
        "{\n  __parent__: [ ../base, ../../common/data.hjson ]\n  learning_rate: 5e-5\n}\n",
    )
    runs = load_config(f"{s3_root}/configs/exp/child.hjson")
    assert len(runs) == 1
    values = runs[0].values
    assert values["learning_rate"] == 5e-5  # the child beats its parents
    assert values["batch_size"] == 8  # a later parent beats an earlier one
    assert values["model"] == "cls_cnn" and values["data_dir"] == "s3://bucket/data"
    assert runs[0].sources["model"] == f"{s3_root}/configs/base.hjson"  # errors can name the remote file


def test_remote_child_with_sibling_parent_and_no_extension(s3_root):
    put(f"{s3_root}/base.hjson", "{a: 1, b: 2}")
    put(f"{s3_root}/child.hjson", "{__parent__: ./base, b: 3}")
    (run,) = load_config(f"{s3_root}/child")  # extension optional for remote files too
    assert (run.values["a"], run.values["b"]) == (1, 3)
