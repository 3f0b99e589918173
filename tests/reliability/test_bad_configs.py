"""The bad-config corpus through x-prepro, x-train and x-eval: every config below exits 2 before any
work, with a message naming the config file and the key, and nothing on disk is created or changed
(not the data_dir, not the run directory, not an output file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import hjson
import pytest
from malformed_helpers import PREPRO_BASE, clean_rows, run, tsv, write_files, write_json

from xdpx.cli import EXIT_CONFIG, run_chain


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Raw data, its data_dir and a tiny finished run: what the bad configs point at."""
    root = tmp_path_factory.mktemp("bad_configs")
    source = write_files(root / "source", {"train.txt": tsv(clean_rows()), "dev.txt": tsv(clean_rows(20, 1))})
    prepro = {**PREPRO_BASE, "data_source": str(source), "data_dir": str(root / "out")}
    train = {"__parent__": "${data_dir}/meta", "data_dir": str(root / "data"), "save_dir": str(root / "new_run"),
             "model": "cls_cnn", "loss": "cross_entropy", "embedding_dim": 8, "num_filters": 4,
             "kernel_sizes": [2], "batch_size": 8, "learning_rate": 3e-3, "max_update": 3, "eval_interval": 3,
             "major_metric": "accuracy"}
    made = write_json(root / "prepro.hjson", {**prepro, "data_dir": str(root / "data")})
    trained = write_json(root / "train.hjson", {**train, "save_dir": str(root / "run")})
    assert run_chain(["x-prepro", str(made), "x-train", str(trained)]) == 0
    evaluate = {"save_dir": str(root / "run"), "valid_subset": "dev", "cuda": False}
    return {"root": root, "x-prepro": prepro, "x-train": train, "x-eval": evaluate}


def without(config: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k != key}


# (command, what is wrong, config changes ({key: None} removes the key, a callable maps the config),
#  the key the message must name, a piece of the message)
CASES: list[tuple[str, str, Any, str, str]] = [
    ("x-prepro", "min_len > max_len", {"min_len": 20}, "min_len", "larger than max_len"),
    ("x-prepro", "negative start_line", {"start_line": -1}, "start_line", "must be >= 0"),
    ("x-prepro", "label_column == text_column", {"label_column": 0}, "label_column", "different columns"),
    ("x-prepro", "pair texts in one column", {"loader": "pair", "processor": "pair", "text1_column": 1,
                                              "text2_column": 1}, "text2_column", "different columns"),
    ("x-prepro", "data_dir == data_source", lambda c: {**c, "data_dir": c["data_source"]}, "data_dir",
     "data_dir is data_source"),
    ("x-prepro", "misspelt key", {"max_lenn": 3}, "max_lenn", "Did you mean 'max_len'?"),
    ("x-prepro", "wrong type", {"max_len": "64"}, "max_len", "expected int"),
    ("x-prepro", "missing required key", {"tokenizer": None}, "tokenizer", "missing required key"),
    ("x-prepro", "unknown processor", {"processor": "singel"}, "processor", "Did you mean 'single'?"),
    ("x-prepro", "missing data_source", {"data_source": "/nonexistent/raw"}, "data_source", "does not exist"),
    ("x-prepro", "workers 0", {"workers": 0}, "workers", "must be >= 1"),
    ("x-prepro", "max_bad_fraction above 1", {"skip_bad_lines": True, "max_bad_fraction": 1.5},
     "max_bad_fraction", "must be in [0, 1)"),
    ("x-prepro", "corpus loader with a single processor", {"loader": "corpus"}, "loader", "goes with processor"),
    ("x-prepro", "extra_columns with a negative column", {"extra_columns": True}, "extra_columns",
     "counted from the start"),
    ("x-prepro", "data_files mapping inverted", {"data_files": {"train": "train.txt"}}, "data_files",
     "did you mean {'train.txt': 'train'}?"),
    ("x-prepro", "data_files matching nothing", {"data_files": ["train.txt", "test.txt"]}, "data_files",
     "nothing matches 'test.txt'"),
    ("x-prepro", "unknown path scheme", {"data_dir": "nosuch://bucket/data"}, "data_dir", "nosuch://"),
    ("x-prepro", "negative min_len", {"min_len": -1}, "min_len", "must be >= 0"),
    ("x-prepro", "empty data_dir", {"data_dir": ""}, "data_dir", "an empty path: name a folder"),
    ("x-train", "empty save_dir", {"save_dir": ""}, "save_dir", "an empty path: name a folder"),
    ("x-train", "misspelt key", {"learning_rat": 1.0}, "learning_rat", "Did you mean 'learning_rate'?"),
    ("x-train", "learning_rate a string", {"learning_rate": "fast"}, "learning_rate", "expected float"),
    ("x-train", "unknown model", {"model": "cnn_cls"}, "model", "unknown model 'cnn_cls'"),
    ("x-train", "batch_size 0", {"batch_size": 0}, "batch_size", "must be >= 1"),
    ("x-train", "overwrite and auto_suffix", {"overwrite": True, "auto_suffix": True}, "overwrite",
     "exclude each other"),
    ("x-train", "no save_dir", {"save_dir": None}, "save_dir", "missing required key"),
    ("x-train", "unknown train_subset", {"train_subset": "nosuch"}, "train_subset", "matches no split"),
    ("x-train", "unknown major_metric", {"major_metric": "acc"}, "major_metric", "choose 'loss' or one of"),
    ("x-train", "dropout 2", {"dropout": 2.0}, "dropout", "must be in [0, 1)"),
    ("x-train", "no length of training", {"max_update": None}, "max_update", "set max_epoch or max_update"),
    ("x-train", "min_len > max_len over the data's meta", {"min_len": 99}, "min_len", "larger than max_len"),
    ("x-train", "missing pretrained_model", {"pretrained_model": "/nonexistent/w.pt"}, "pretrained_model",
     "does not exist"),
    ("x-eval", "missing save_dir", {"save_dir": "/nonexistent/run"}, "save_dir", "does not exist"),
    ("x-eval", "save_dir and config", lambda c: {**c, "config": c["save_dir"] + "/../train.hjson"}, "config",
     "set exactly one of save_dir"),
    ("x-eval", "unknown valid_subset", {"valid_subset": "nosuch"}, "valid_subset", "is neither a split"),
    ("x-eval", "a folder as valid_subset", lambda c: {**c, "valid_subset": c["save_dir"]}, "valid_subset",
     "is a folder, not a file: name each file inside it"),
    ("x-eval", "misspelt key", {"valid_subsets": "dev"}, "valid_subsets", "Did you mean 'valid_subset'?"),
    ("x-eval", "unknown key in extra_config", {"extra_config": {"losss": "mse"}}, "losss", "Did you mean 'loss'?"),
    ("x-eval", "missing checkpoint", lambda c: {**c, "checkpoint": c["save_dir"] + "/checkpoint-999.pt"},
     "checkpoint", "does not exist"),
    ("x-eval", "unwritable save_to_file", {"save_to_file": "/proc/xdpx/scores.tsv"}, "save_to_file",
     "cannot write"),
    ("x-eval", "save_mode", {"save_mode": "x"}, "save_mode", "Choose one of ['a', 'w']"),
    ("x-eval", "max_bad_fraction 2", {"skip_bad_lines": True, "max_bad_fraction": 2}, "max_bad_fraction",
     "must be in [0, 1)"),
]


def tree(root: Path) -> dict[str, tuple[int, int] | str]:
    """Every file (size, mtime) and folder under root, config files of the cases left out."""
    return {str(p): ("dir" if p.is_dir() else (p.stat().st_size, p.stat().st_mtime_ns))
            for p in root.rglob("*") if not p.name.startswith("case")}


@pytest.mark.parametrize("command,what,change,key,message", CASES, ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_bad_config_exits_2_before_any_work(world: dict[str, Any], tmp_path: Path, capsys: Any, command: str,
                                            what: str, change: Any, key: str, message: str) -> None:
    config = dict(world[command])
    if callable(change):
        config = change(config)
    else:
        for k, v in change.items():
            config = without(config, k) if v is None else {**config, k: v}
    path = write_json(world["root"] / f"case-{command}.hjson", config)
    before = tree(world["root"])
    code, out, err = run(command, path, capsys)
    assert code == EXIT_CONFIG, (out, err)
    assert str(path) in err and f"{key}" in err and message in err, err
    assert "Traceback" not in err
    assert tree(world["root"]) == before  # no run dir, data_dir or output created, nothing changed


def test_data_dir_inside_data_source_never_reads_its_own_outputs(tmp_path: Path, capsys: Any) -> None:
    """Handled, not refused: files under data_dir are never inputs, even for a recursive glob."""
    source = write_files(tmp_path / "source", {"train.txt": tsv(clean_rows())})
    config = write_json(tmp_path / "prepro.hjson", {**PREPRO_BASE, "data_source": str(source),
                                                    "data_files": "**/*.txt", "data_dir": str(source / "bin")})
    for _ in range(2):  # the second run finds vocab.txt, target_map.txt and log.txt under data_dir
        code, _, err = run("x-prepro", config, capsys)
        assert code == 0, err
    assert hjson.loads((source / "bin" / "meta.hjson").read_text())["data_size"] == {"train": 40}


@pytest.mark.parametrize("command,key,below", [("x-prepro", "data_dir", ""), ("x-train", "save_dir", ""),
                                               ("x-train", "save_dir", "sub")])
def test_a_dangling_symlink_as_output_folder_exits_2_and_creates_nothing(world: dict[str, Any], tmp_path: Path,
                                                                         capsys: Any, command: str, key: str,
                                                                         below: str) -> None:
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "gone" / "target")  # --dry passed such a link, then os.makedirs failed at it
    path = write_json(tmp_path / "case.hjson", {**world[command], key: str(link / below)})
    code, out, err = run(command, path, capsys)
    assert code == EXIT_CONFIG, (out, err)
    assert f"{path}: key '{key}': {link} is a symbolic link to '{tmp_path / 'gone' / 'target'}', which does not " \
           "exist: create its target, or choose another path" in err, err
    assert not (tmp_path / "gone").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["case.hjson", "link"]


def test_x_pred_refuses_a_folder_as_input_before_any_work(world: dict[str, Any], tmp_path: Path, capsys: Any) -> None:
    (tmp_path / "inputs").mkdir()
    (tmp_path / "inputs" / "a.txt").write_text("good film\n")
    out = tmp_path / "pred.tsv"
    config = write_json(tmp_path / "pred.hjson", {"save_dir": str(world["root"] / "run"), "cuda": False,
                                                  "predict_file_map": {str(tmp_path / "inputs"): str(out)}})
    code, stdout, err = run("x-pred", config, capsys)
    assert code == EXIT_CONFIG, (stdout, err)
    assert f"{config}: key 'predict_file_map': '{tmp_path / 'inputs'}' is a folder, not a file" in err, err
    assert "Traceback" not in err and not out.exists()


@pytest.mark.parametrize("storage,message", [
    ("nosuch://", "'nosuch://': SQLAlchemy has no database dialect or driver 'nosuch'"),
    ("postgresql+nodriver://host/db", "no database dialect or driver 'postgresql+nodriver'"),
    ("not a url", "'not a url' is not a database URL")])
def test_x_tune_refuses_a_storage_that_is_no_database_url_and_leaves_no_study_folder(
        world: dict[str, Any], tmp_path: Path, capsys: Any, storage: str, message: str) -> None:
    write_json(tmp_path / "space.hjson", {"learning_rate": {"type": "float", "values": [1e-3, 1e-2]}})
    write_json(tmp_path / "train.hjson", world["x-train"])
    config = write_json(tmp_path / "tune.hjson", {
        "space_config": "space", "base_config": "train", "save_dir": str(tmp_path / "study"), "storage": storage,
        "max_trials": 1, "assess_start_step": 1, "assess_interval": 1})
    code, out, err = run("x-tune", config, capsys)
    assert code == EXIT_CONFIG, (out, err)
    assert f"{config}: key 'storage': " in err and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "study").exists()


@pytest.mark.parametrize("content,message", [
    (None, "XDPX_IO_CONFIG: io config file not found: {path}"),
    ("{s3: {endpoint_url: http://x\n", "XDPX_IO_CONFIG: io config {path} is not valid hjson/json"),
    ("[1, 2]", "io config from {path} (named by XDPX_IO_CONFIG) must map protocol -> options, got list"),
    ("folder", "XDPX_IO_CONFIG: io config {path} cannot be read: Is a directory")])
def test_a_bad_io_config_file_is_one_line_naming_it_before_any_work(world: dict[str, Any], tmp_path: Path,
                                                                    capsys: Any, monkeypatch: Any,
                                                                    content: str | None, message: str) -> None:
    """XDPX_IO_CONFIG is read when a remote path is first used: here x-prepro's check of an s3:// data_dir."""
    from xdpx import io

    path = tmp_path / "io.hjson"
    if content == "folder":
        path.mkdir()
    elif content is not None:
        path.write_text(content)
    monkeypatch.setenv("XDPX_IO_CONFIG", str(path))
    io.reset_storage_options()  # forget a config read before
    monkeypatch.setattr(io.credentials, "_file_layer", None)
    config = write_json(tmp_path / "case.hjson", {**world["x-prepro"], "data_dir": "s3://bucket/data"})
    try:
        code, out, err = run("x-prepro", config, capsys)
    finally:
        io.reset_storage_options()
    assert code == EXIT_CONFIG, (out, err)
    assert f"{config}: key 'data_dir': {message.format(path=path)}" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("output", ["", "link/pred.tsv"])
def test_x_pred_refuses_an_empty_or_dangling_output_path_before_any_work(world: dict[str, Any], tmp_path: Path,
                                                                         capsys: Any, output: str) -> None:
    (tmp_path / "link").symlink_to(tmp_path / "gone")
    target = str(tmp_path / output) if output else ""
    config = write_json(tmp_path / "pred.hjson", {"save_dir": str(world["root"] / "run"), "cuda": False,
                                                  "predict_file_map": {str(world["root"] / "source" / "dev.txt"):
                                                                       target}})
    code, out, err = run("x-pred", config, capsys)
    assert code == EXIT_CONFIG, (out, err)
    expected = ("an empty path: name a folder (or file) to write" if not output else
                f"{tmp_path / 'link'} is a symbolic link to '{tmp_path / 'gone'}', which does not exist")
    assert f"{config}: key 'predict_file_map': {expected}" in err and "Traceback" not in err, err
    assert not (tmp_path / "gone").exists()
