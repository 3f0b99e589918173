"""Every command that writes works on a fresh s3:// prefix (nothing there yet), on the moto server:
x-prepro, x-train (plain, overwrite, auto_suffix, resume; --dry agrees), x-eval save_to_file, x-pred,
x-viz and the exports."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from optional_components import required_components
from train_runs import REPO, train_config

from xdpx import io
from xdpx.cli import x_script
from xdpx.train.run_dir import RUN_MARKER

SAMPLE = REPO / "examples/data/sample/reviews"


def write(path: Path, config: dict) -> Path:
    path.write_text(json.dumps(config))
    return path


@pytest.fixture(scope="module")
def remote_data(s3_endpoint, tmp_path_factory) -> str:
    """x-prepro of the committed reviews into a prefix that does not exist yet."""
    from xdpx.cli import run_chain

    data_dir = f"s3://xdpx-io-test/fresh-{tmp_path_factory.mktemp('x').name}/data"
    assert not io.exists(data_dir)
    config = write(tmp_path_factory.mktemp("prepro") / "prepro.hjson", {
        "__parent__": str(REPO / "examples/prepro/reviews_char"), "data_source": str(SAMPLE), "data_dir": data_dir,
        "workers": 1})
    assert run_chain(["x-prepro", str(config)]) == 0
    assert io.isfile(f"{data_dir}/meta.hjson") and io.isfile(f"{data_dir}/train.tokens.idx")
    return data_dir


@pytest.fixture(scope="module")
def remote_run(remote_data, tmp_path_factory) -> str:
    """A plain x-train run into a fresh prefix (--dry first: it must agree and write nothing)."""
    from xdpx.cli import run_chain

    save_dir = remote_data.replace("/data", "/new/prefix/run")
    config = train_config(tmp_path_factory.mktemp("plain") / "t.hjson", remote_data, save_dir, **SHORT)
    assert run_chain(["x-train", str(config), "--dry"]) == 0
    assert not io.exists(save_dir)
    assert run_chain(["x-train", str(config)]) == 0
    return save_dir


SHORT = {"max_update": 3, "eval_interval": 3}


def test_x_train_on_a_fresh_prefix(remote_run):
    assert {RUN_MARKER, "args.py", "state.pt", "checkpoint-3.pt", "checkpoints.json", "log.txt"} <= \
        set(io.listdir(remote_run))


@pytest.mark.parametrize("flag", ["overwrite", "auto_suffix", "resume"])
def test_x_train_with_overwrite_auto_suffix_or_resume_on_a_fresh_prefix(remote_data, s3_root, tmp_path, cli, flag):
    save_dir = f"{s3_root}/new/prefix/run"
    config = train_config(tmp_path / "t.hjson", remote_data, save_dir, **SHORT, **{flag: True})
    code, out = cli("x-train", config, "--dry")
    assert code == 0, out
    assert not io.exists(save_dir)  # --dry wrote nothing
    code, out = cli("x-train", config)
    assert code == 0, out
    assert {RUN_MARKER, "state.pt", "checkpoint-3.pt"} <= set(io.listdir(save_dir))
    if flag == "overwrite":  # a re-run clears the run on the object store too
        assert cli("x-train", config)[0] == 0
        assert "overwrite: cleared the earlier run" in io.open(f"{save_dir}/log.txt").read()


def test_inference_viz_and_exports_write_to_fresh_prefixes(remote_run, s3_root, tmp_path, cli):
    run = remote_run
    results = f"{s3_root}/eval/new/results.tsv"
    code, out = cli("x-eval", write(tmp_path / "e.hjson", {"save_dir": run, "valid_subset": "dev",
                                                           "save_to_file": results}))
    assert code == 0, out
    assert io.open(results).read().splitlines()[1].split("\t")[1] == "dev"

    predictions = f"{s3_root}/pred/new/test.tsv"
    code, out = cli("x-pred", write(tmp_path / "p.hjson", {"save_dir": run,
                                                           "predict_file_map": {str(SAMPLE / "test.txt"): predictions}}))
    assert code == 0, out
    assert len(io.open(predictions).read().splitlines()) >= 60

    assert not io.exists(f"{run}/plots")  # the run trained with viz: false; x-viz makes save_dir/plots
    code, out = cli("x-viz", write(tmp_path / "viz.hjson", {"save_dir": run}))
    assert code == 0, out
    assert "accuracy.png" in io.listdir(f"{run}/plots")

    tools = {"export_torchscript": "model.pt", "export_onnx": "model.onnx"}
    # without onnx the ONNX export is left out, unless XDPX_REQUIRE says CI installed it (then it must run)
    missing = importlib.util.find_spec("onnx") is None or importlib.util.find_spec("onnxruntime") is None
    if missing and "onnxruntime" not in required_components():
        tools.pop("export_onnx")
    for tool, model_file in tools.items():
        out_dir = f"{s3_root}/exports/new/{tool}"
        assert x_script([tool, str(write(tmp_path / f"{tool}.hjson", {"save_dir": run, "out_dir": out_dir}))]) == 0
        assert io.isfile(f"{out_dir}/{model_file}") and io.isfile(f"{out_dir}/vocab.txt")


def test_makedirs_makes_an_empty_prefix_a_directory_every_process_sees(s3_root):
    folder = f"{s3_root}/a/b"
    assert not io.exists(folder)
    io.makedirs(folder)
    assert io.exists(folder) and io.isdir(folder) and io.listdir(folder) == [] and not io.isfile(folder)
    assert io.listdir(s3_root) == ["a"]
    with io.open(f"{folder}/x.txt", "w") as f:
        f.write("x")
    assert io.listdir(folder) == ["x.txt"] and io.glob(f"{folder}/*") == [f"{folder}/x.txt"]
    io.rmtree(folder)
    assert not io.exists(folder)
