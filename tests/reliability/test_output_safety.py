"""Every command: nothing overwritten that XDPX did not write (docs/reliability.md).

Each writing command in turn is pointed at (a) a folder or file holding a user's file, (b) its own input,
(c) an x-train run directory, (d) a checkpoint: it exits 2 before any work, with and without --dry, the
message names the key and the path, and the user's files are byte-identical afterwards. Re-running a
command on its own earlier output still works.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from train_runs import train_config

from xdpx.cli import x_script
from xdpx.io.ownership import MANIFEST, claim

REPO = Path(__file__).resolve().parents[2]
REVIEWS = REPO / "examples/data/sample/reviews"
EXPORTS = ("export_torchscript", "export_onnx", "export_hf", "export_tf")


@pytest.fixture(scope="module")
def world(reviews: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny finished run (checkpoint-3.pt), a copy of it, and a raw input file beside them."""
    from xdpx.cli import run_chain

    root = tmp_path_factory.mktemp("output_safety")
    assert run_chain(["x-train", str(train_config(root / "t.hjson", reviews, root / "run", max_update=3))]) == 0
    shutil.copytree(root / "run", root / "other_run")
    shutil.copy(REVIEWS / "dev.txt", root / "new.txt")
    return {"root": root, "data": reviews, "run": root / "run", "other_run": root / "other_run",
            "checkpoint": root / "run" / "checkpoint-3.pt", "new": root / "new.txt"}


def tree(*places: Path) -> dict[str, bytes]:
    """Every file under (or at) the given places, with its bytes."""
    found = {}
    for place in places:
        files = [place] if place.is_file() else sorted(p for p in place.rglob("*") if p.is_file())
        found.update({str(p): p.read_bytes() for p in files})
    return found


def user_folder(root: Path, **files: str) -> Path:
    """A folder of the user's own files (``name=text``; ``__`` in a name stands for a subfolder)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        path = root / name.replace("__", "/").replace("_DOT_", ".")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def write(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(json.dumps({k: str(v) if isinstance(v, Path) else v for k, v in config.items()}))
    return path


def assert_refused(run: Callable[..., tuple[int, str]], argv: list[Any], key: str, path: Any, reason: str,
                   protected: list[Path], flags: tuple[tuple[str, ...], ...] = (("--dry",), ())) -> None:
    """exit 2 with and without --dry, the key, the path and the reason in the message, nothing changed."""
    before = tree(*protected)
    for flag in flags:
        code, out = run(*argv, *flag)
        assert code == 2, out
        assert f"key '{key}'" in out and str(path) in out and "refuses to write" in out and reason in out, out
        assert tree(*protected) == before


@pytest.fixture
def script(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str]]:
    """``script('options_docs', dir)`` -> (exit code, stdout + stderr) of an x-script tool."""

    def run(*argv: object) -> tuple[int, str]:
        capsys.readouterr()
        code = x_script([str(a) for a in argv])
        captured = capsys.readouterr()
        return code, captured.out + captured.err

    return run


# ---- x-prepro -------------------------------------------------------------------------------------------------


def prepro(path: Path, data_dir: Any, **more: Any) -> Path:
    return write(path, {"__parent__": str(REPO / "examples/prepro/reviews_char"), "data_source": str(REVIEWS),
                        "data_dir": data_dir, "workers": 1, **more})


def test_x_prepro_refuses_a_users_folder_its_input_a_run_and_a_checkpoint(world, tmp_path, cli):
    mine = user_folder(tmp_path / "d", vocab_DOT_txt="mine\n", args_DOT_py="# mine\n")
    assert_refused(cli, ["x-prepro", prepro(tmp_path / "a.hjson", mine)], "data_dir", mine,
                   "it holds files XDPX did not write (args.py, vocab.txt)", [mine])
    raw = shutil.copytree(REVIEWS, tmp_path / "project" / "raw")  # data_dir: the folder holding the raw data
    assert_refused(cli, ["x-prepro", prepro(tmp_path / "b.hjson", raw.parent, data_source=str(raw))],
                   "data_dir", raw.parent, f"it holds the input data_source '{raw}'", [raw.parent])
    run = world["run"]
    assert_refused(cli, ["x-prepro", prepro(tmp_path / "c.hjson", run)], "data_dir", run,
                   "it is a run directory of x-train", [run])
    checkpoint = world["checkpoint"]
    assert_refused(cli, ["x-prepro", prepro(tmp_path / "d.hjson", checkpoint)], "data_dir", checkpoint,
                   "it is a file (x-train wrote it", [checkpoint])


def test_x_prepro_adds_a_split_to_its_own_data_dir(tmp_path, cli):
    data_dir = tmp_path / "data"
    code, out = cli("x-prepro", prepro(tmp_path / "a.hjson", data_dir, data_files="train.txt"))
    assert code == 0, out
    assert json.loads((data_dir / MANIFEST).read_text())["owner"] == "x-prepro"
    code, out = cli("x-prepro", prepro(tmp_path / "b.hjson", data_dir, data_files="dev.txt"))
    assert code == 0, out
    assert (data_dir / "dev.tokens.idx").exists() and (data_dir / "train.tokens.idx").exists()


# ---- x-pred and x-eval ----------------------------------------------------------------------------------------


def pred(path: Path, world: dict[str, Path], output: Any, **more: Any) -> Path:
    return write(path, {"save_dir": world["run"], "predict_file_map": {str(world["new"]): str(output)},
                        "cuda": False, **more})


def test_x_pred_refuses_a_users_file_its_input_a_run_file_and_a_checkpoint(world, tmp_path, cli):
    mine = user_folder(tmp_path / "mydocs", notes_DOT_txt="my notes\n") / "notes.txt"
    assert_refused(cli, ["x-pred", pred(tmp_path / "a.hjson", world, mine)], "predict_file_map", mine,
                   "the file exists and XDPX did not write it", [mine])
    new = world["new"]
    assert_refused(cli, ["x-pred", pred(tmp_path / "b.hjson", world, new)], "predict_file_map", new,
                   f"it is the input predict_file_map '{new}'", [new])
    run = world["run"]
    for name in ("args.py", "log.txt"):
        assert_refused(cli, ["x-pred", pred(tmp_path / "c.hjson", world, run / name)], "predict_file_map",
                       run / name, "x-train wrote it (a file of the run directory", [run])
    checkpoint = world["checkpoint"]
    assert_refused(cli, ["x-pred", pred(tmp_path / "d.hjson", world, checkpoint)], "predict_file_map", checkpoint,
                   "x-train wrote it", [checkpoint])
    assert_refused(cli, ["x-pred", pred(tmp_path / "e.hjson", world, checkpoint, checkpoint=str(checkpoint))],
                   "predict_file_map", checkpoint, f"it is the input checkpoint '{checkpoint}'", [checkpoint])


def test_x_pred_twice_into_its_own_output(world, tmp_path, cli):
    output = tmp_path / "new.pred.tsv"
    for _ in range(2):
        code, out = cli("x-pred", pred(tmp_path / "p.hjson", world, output))
        assert code == 0, out
    assert json.loads((tmp_path / MANIFEST).read_text())["files"] == {"new.pred.tsv": "x-pred"}


def evaluate(path: Path, world: dict[str, Path], output: Any, subset: Any = "dev", **more: Any) -> Path:
    return write(path, {"save_dir": world["run"], "valid_subset": str(subset), "save_to_file": str(output),
                        "save_mode": "w", "cuda": False, **more})


def test_x_eval_save_to_file_refuses_a_users_file_its_input_a_run_file_and_a_checkpoint(world, tmp_path, cli):
    mine = user_folder(tmp_path / "mydocs", results_DOT_tsv="my results\n") / "results.tsv"
    assert_refused(cli, ["x-eval", evaluate(tmp_path / "a.hjson", world, mine)], "save_to_file", mine,
                   "the file exists and XDPX did not write it", [mine])
    new = world["new"]
    assert_refused(cli, ["x-eval", evaluate(tmp_path / "b.hjson", world, new, subset=new)], "save_to_file", new,
                   f"it is the input valid_subset '{new}'", [new])
    run = world["run"]
    assert_refused(cli, ["x-eval", evaluate(tmp_path / "c.hjson", world, run / "args.py")], "save_to_file",
                   run / "args.py", "x-train wrote it", [run])
    checkpoint = world["checkpoint"]
    assert_refused(cli, ["x-eval", evaluate(tmp_path / "d.hjson", world, checkpoint)], "save_to_file", checkpoint,
                   "x-train wrote it", [checkpoint])


def test_x_eval_writes_eval_tsv_into_the_run_and_replaces_its_own(world, tmp_path, cli):
    run = shutil.copytree(world["run"], tmp_path / "run")
    before = tree(run / "args.py", run / "log.txt", run / "checkpoint-3.pt")
    config = {**world, "run": run}
    for mode in ("w", "w", "a"):  # the documented place (README: the demo's eval.tsv), replaced, then added to
        code, out = cli("x-eval", evaluate(tmp_path / "e.hjson", config, run / "eval.tsv", save_mode=mode))
        assert code == 0, out
    assert len((run / "eval.tsv").read_text().splitlines()) == 3
    assert tree(run / "args.py", run / "log.txt", run / "checkpoint-3.pt") == before
    # an eval.tsv written before XDPX kept records is still recognised by its header
    (run / MANIFEST).unlink()
    code, out = cli("x-eval", evaluate(tmp_path / "e.hjson", config, run / "eval.tsv"), "--dry")
    assert code == 0, out


# ---- x-tune -----------------------------------------------------------------------------------------------------


def tune_config(root: Path, world: dict[str, Path], save_dir: Any) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    train_config(root / "train.hjson", world["data"], root / "unused", max_update=6)
    write(root / "space.hjson", {"learning_rate": {"type": "float", "values": [1e-3, 3e-2], "log": True}})
    return write(root / "tune.hjson", {"space_config": "./space", "base_config": "./train", "save_dir": save_dir,
                                       "tuner": "random", "assess_start_step": 3, "assess_interval": 3,
                                       "parallel_runs": 1, "max_trials": 1})


def test_x_tune_refuses_a_users_folder_its_input_a_run_and_a_checkpoint(world, tmp_path, cli):
    mine = user_folder(tmp_path / "mydocs", results_DOT_tsv="my results\n")
    assert_refused(cli, ["x-tune", tune_config(tmp_path / "a", world, mine)], "save_dir", mine,
                   "it holds files XDPX did not write (results.tsv)", [mine])
    configs = tmp_path / "b"
    assert_refused(cli, ["x-tune", tune_config(configs, world, configs)], "save_dir", configs,
                   "it holds the input", [configs])
    run = world["run"]
    assert_refused(cli, ["x-tune", tune_config(tmp_path / "c", world, run)], "save_dir", run,
                   "it is a run directory of x-train", [run])
    checkpoint = world["checkpoint"]
    assert_refused(cli, ["x-tune", tune_config(tmp_path / "d", world, checkpoint)], "save_dir", checkpoint,
                   "it is a file", [checkpoint])


def test_x_tune_goes_on_in_its_own_study_folder(world, tmp_path, cli):
    study = tmp_path / "study"
    study.mkdir()
    (study / "results.tsv").write_text("trial\tstate\n")
    claim("x-tune", str(study))  # what x-tune records after a run
    code, out = cli("x-tune", tune_config(tmp_path / "t", world, study), "--dry")
    assert code == 0, out


# ---- x-viz ------------------------------------------------------------------------------------------------------


def viz(path: Path, save_dir: Any) -> Path:
    return write(path, {"save_dir": save_dir})


def test_x_viz_refuses_a_users_plots_and_a_checkpoint(world, tmp_path, cli):
    logs = user_folder(tmp_path / "report", plots__loss_DOT_png="my own figure\n")
    for name in ("args.py", "valid.log.tsv"):  # copied logs: a run to x-viz, but not x-train's folder
        shutil.copy(world["run"] / name, logs / name)
    assert_refused(cli, ["x-viz", viz(tmp_path / "a.hjson", logs)], "save_dir", logs / "plots",
                   "it holds files XDPX did not write (loss.png)", [logs])
    checkpoint = world["checkpoint"]
    assert_refused(cli, ["x-viz", viz(tmp_path / "d.hjson", checkpoint)], "save_dir", checkpoint,
                   "is a file (x-train wrote it", [checkpoint])


def test_x_viz_twice_into_a_run_leaves_the_run_as_it_was(world, tmp_path, cli):
    run = shutil.copytree(world["run"], tmp_path / "run")
    before = tree(*(p for p in run.iterdir() if p.name != "plots"))
    for _ in range(2):
        code, out = cli("x-viz", viz(tmp_path / "v.hjson", run))
        assert code == 0, out
    assert (run / "plots" / "loss.png").exists()
    assert tree(*(p for p in run.iterdir() if p.name != "plots")) == before


# ---- exports ----------------------------------------------------------------------------------------------------


def export(path: Path, world: dict[str, Path], out_dir: Any) -> Path:
    return write(path, {"save_dir": world["run"], "out_dir": out_dir})


@pytest.mark.parametrize("name", EXPORTS)
def test_each_export_refuses_a_users_folder_its_input_a_run_and_a_checkpoint(name, world, tmp_path, script):
    mine = user_folder(tmp_path / "mydocs", notes_DOT_txt="my notes\n")
    assert_refused(script, [name, export(tmp_path / "a.hjson", world, mine)], "out_dir", mine,
                   "it holds files XDPX did not write (notes.txt)", [mine])
    run = world["run"]
    assert_refused(script, [name, export(tmp_path / "b.hjson", world, run)], "out_dir", run,
                   f"it is the input save_dir '{run}'", [run])
    other = world["other_run"]
    assert_refused(script, [name, export(tmp_path / "c.hjson", world, other)], "out_dir", other,
                   "it is a run directory of x-train", [other])
    checkpoint = world["checkpoint"]
    assert_refused(script, [name, export(tmp_path / "d.hjson", world, checkpoint)], "out_dir", checkpoint,
                   "it is a file (x-train wrote it", [checkpoint])


def test_export_pt_refuses_a_users_folder_its_input_a_run_and_a_checkpoint(world, tmp_path, script):
    tf = user_folder(tmp_path / "tf", bert_config_DOT_json="{}\n")

    def config(path: Path, out_dir: Any) -> Path:
        return write(path, {"tf_ckpt_path": str(tf / "bert_model.ckpt"), "tf_config": str(tf / "bert_config.json"),
                            "out_dir": out_dir})

    mine = user_folder(tmp_path / "mydocs", config_DOT_json="{}\n")
    assert_refused(script, ["export_pt", config(tmp_path / "a.hjson", mine)], "out_dir", mine,
                   "it holds files XDPX did not write (config.json)", [mine])
    assert_refused(script, ["export_pt", config(tmp_path / "b.hjson", tf)], "out_dir", tf,
                   "it holds the input tf_config", [tf])
    run = world["run"]
    assert_refused(script, ["export_pt", config(tmp_path / "c.hjson", run)], "out_dir", run,
                   "it is a run directory of x-train", [run])
    checkpoint = world["checkpoint"]
    assert_refused(script, ["export_pt", config(tmp_path / "d.hjson", checkpoint)], "out_dir", checkpoint,
                   "it is a file", [checkpoint])


def test_an_export_twice_into_its_own_out_dir(world, tmp_path, script):
    out_dir = tmp_path / "exported"
    for _ in range(2):
        code, out = script("export_torchscript", export(tmp_path / "e.hjson", world, out_dir))
        assert code == 0, out
    assert json.loads((out_dir / MANIFEST).read_text())["owner"] == "export_torchscript"
    code, out = script("export_onnx", export(tmp_path / "e.hjson", world, out_dir), "--dry")
    assert code == 2 and "it is a folder of export_torchscript, not of export_onnx" in out, out


# ---- x-script tools ---------------------------------------------------------------------------------------------


def test_options_docs_refuses_a_users_page_and_rewrites_its_own(tmp_path, script):
    mine = user_folder(tmp_path / "mydocs")
    (mine / "x-train.md").write_text("# my notes on x-train\n")
    assert_refused(script, ["options_docs", mine], "DIR", mine / "x-train.md",
                   "the file exists and XDPX did not write it", [mine], flags=((),))
    docs = tmp_path / "docs"
    for _ in range(2):
        code, out = script("options_docs", docs)
        assert code == 0, out
    assert (docs / "x-train.md").exists() and not (docs / MANIFEST).exists()  # each page carries its own mark


def test_profile_refuses_a_users_folder_its_input_a_run_and_a_checkpoint(world, tmp_path, script):
    config = train_config(tmp_path / "t.hjson", world["data"], tmp_path / "unused")
    mine = user_folder(tmp_path / "mydocs", trace_DOT_json="{}\n")
    for out_dir, reason in ((mine, "it holds files XDPX did not write (trace.json)"),
                            (world["data"].parent, "it holds the input data_dir"),
                            (world["run"], "it is a run directory of x-train"),
                            (world["checkpoint"], "it is a file")):
        assert_refused(script, ["profile", config, "--steps", "1", "--out", out_dir], "--out", out_dir, reason,
                       [mine, world["data"], world["run"]], flags=((),))


def test_clean_checkpoints_leaves_a_folder_that_only_looks_like_a_run(world, tmp_path, script):
    looks = tmp_path / "root" / "mine"
    looks.mkdir(parents=True)
    for name in ("args.py", "valid.log.tsv"):
        shutil.copy(world["run"] / name, looks / name)
    for step in (1, 2, 3):
        (looks / f"checkpoint-{step}.pt").write_text(f"my weights {step}\n")
    before = tree(looks)
    code, out = script("clean_checkpoints", tmp_path / "root")
    assert code == 0 and "skipped, not a run directory of x-train" in out, out
    assert tree(looks) == before
