"""The one-line errors docs/reliability.md promises: a checkpoint cut in half in every command that loads
one (x-train's resume and pretrained_model, x-eval, x-pred, x-serve, the exports), a weights file of another
format cut in half (safetensors, ONNX), and a config whose ``__parent__`` or data_dir names nothing. Each
ends with exit 1 (2 for a config), one line on stderr naming the file, and no traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from train_runs import REPO, train_config

from xdpx.cli import run_chain, x_script
from xdpx.errors import UserError


@pytest.fixture(scope="module")
def trained(reviews: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One finished tiny run (checkpoints of updates 3 and 6, state.pt) whose copies the tests cut."""
    root = tmp_path_factory.mktemp("trained")
    assert run_chain(["x-train", str(train_config(root / "t.hjson", reviews, root / "run"))]) == 0
    return root / "run"


def cut_in_half(path: Path, fraction: float = 0.5) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * fraction)])
    return path


def damaged_run(trained: Path, tmp_path: Path, fraction: float = 0.5) -> tuple[Path, Path]:
    """A copy of the run with every weights file cut (in half); (the run, its <best> checkpoint)."""
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    for path in run.glob("*.pt"):
        cut_in_half(path, fraction)
    return run, run / json.loads((run / "checkpoints.json").read_text())["best"]


def write(path: Path, config: dict) -> Path:
    path.write_text(json.dumps(config))
    return path


def assert_one_line(code: int, err: str, expected_code: int, *expected: str) -> None:
    lines = err.strip().splitlines()
    assert code == expected_code, err
    assert "Traceback" not in err and len(lines) == 1, err
    for text in expected:
        assert text in lines[0], err


Command = Callable[[Path, Path, Path, Path], tuple[list[str], Path]]


def x_train_resume(reviews: Path, run: Path, best: Path, tmp: Path) -> tuple[list[str], Path]:
    return ["x-train", str(train_config(tmp / "t.hjson", reviews, run, resume=True, max_update=9))], run / "state.pt"


def x_train_pretrained(reviews: Path, run: Path, best: Path, tmp: Path) -> tuple[list[str], Path]:
    return ["x-train", str(train_config(tmp / "t.hjson", reviews, tmp / "new", pretrained_model=str(best)))], best


def x_eval(reviews: Path, run: Path, best: Path, tmp: Path) -> tuple[list[str], Path]:
    return ["x-eval", str(write(tmp / "eval.hjson", {"save_dir": str(run), "valid_subset": "dev"}))], best


def x_pred(reviews: Path, run: Path, best: Path, tmp: Path) -> tuple[list[str], Path]:
    inputs = str(REPO / "examples/data/sample/reviews/test.txt")
    config = {"save_dir": str(run), "predict_file_map": {inputs: str(tmp / "pred.tsv")}}
    return ["x-pred", str(write(tmp / "pred.hjson", config))], best


def export(name: str) -> Command:
    def command(reviews: Path, run: Path, best: Path, tmp: Path) -> tuple[list[str], Path]:
        return [name, str(write(tmp / "export.hjson", {"save_dir": str(run), "out_dir": str(tmp / "out")}))], best

    return command


CHAIN_COMMANDS = {"x-train resume": x_train_resume, "x-train pretrained_model": x_train_pretrained, "x-eval": x_eval,
                  "x-pred": x_pred, **{name: export(name) for name in
                                       ("export_torchscript", "export_onnx", "export_hf", "export_tf")}}
# Where the cut falls decides what torch's zip reader raises: state.pt cut in half gives a RuntimeError (no
# central directory), cut to a quarter an OSError (a seek past the end), as every checkpoint cut in half does.
CUTS = [(name, 0.5) for name in CHAIN_COMMANDS] + [("x-train resume", 0.25)]


@pytest.mark.parametrize("name,fraction", CUTS)
def test_a_checkpoint_cut_in_half_is_one_line_in_every_loading_command(name, fraction, reviews, trained, tmp_path,
                                                                       capsys):
    run, best = damaged_run(trained, tmp_path, fraction)
    argv, damaged = CHAIN_COMMANDS[name](reviews, run, best, tmp_path)
    capsys.readouterr()
    code = x_script(argv) if name.startswith("export_") else run_chain(argv)  # exports are x-script tools
    assert_one_line(code, capsys.readouterr().err, 1, f"{argv[0]}: error:",
                    f"{damaged} is not a readable checkpoint: it is truncated")
    assert not (tmp_path / "out").exists() and not (tmp_path / "pred.tsv").exists()


def test_a_checkpoint_cut_in_half_is_one_line_in_x_serve(trained, tmp_path):
    """x-serve parses its own command line (no dispatcher): its real stderr, from its entry point."""
    run, best = damaged_run(trained, tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", "from xdpx.cli import x_serve; x_serve()", str(run), "--port", "0",
                           "--cpu", "--threads", "1"], capture_output=True, text=True, env=env, timeout=120)
    assert_one_line(done.returncode, done.stderr, 1, "x-serve: error:",
                    f"{best} is not a readable checkpoint: it is truncated")


def test_a_safetensors_file_cut_in_half_is_one_line(tmp_path):
    """BERT's pretrained_model may be a Hugging Face directory: its model.safetensors, cut."""
    import torch
    from safetensors.torch import save_file

    from xdpx.models.bert_pretrained import read_weights

    save_file({"bert.embeddings.word_embeddings.weight": torch.randn(64, 8)}, str(tmp_path / "model.safetensors"))
    cut_in_half(tmp_path / "model.safetensors")
    with pytest.raises(UserError, match=r"model\.safetensors is not a readable safetensors file: it is truncated"):
        read_weights(str(tmp_path))


def test_an_onnx_model_cut_in_half_is_one_line(tmp_path):
    """x-serve of an ONNX export loads its model.onnx with onnxruntime."""
    pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from xdpx.serve.onnx_backend import OnnxModel

    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    path = tmp_path / "model.onnx"
    onnx.save(helper.make_model(graph), str(path))
    OnnxModel(str(path), ["x"])  # the whole file loads
    cut_in_half(path)
    with pytest.raises(UserError, match=r"model\.onnx is not a loadable ONNX model: it is truncated") as caught:
        OnnxModel(str(path), ["x"])
    assert "\n" not in str(caught.value)


def test_a_missing_parent_names_the_file_the_key_and_where_it_looked(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = write(tmp_path / "child.hjson", {"__parent__": "./base", "save_dir": str(tmp_path / "run")})
    capsys.readouterr()
    code = run_chain(["x-train", str(config), "--dry"])
    assert_one_line(code, capsys.readouterr().err, 2, f"{config}: key '__parent__': './base'",
                    f"{tmp_path / 'base.hjson'}", f"a relative path is looked for in the folder of {config} ({tmp_path})",
                    f"then in the working directory ({tmp_path})", "Fix the path")


def test_a_data_dir_without_meta_names_the_file_the_key_and_the_fix(tmp_path, capsys, monkeypatch):
    """x-train's configs inherit the data facts with ``__parent__: ${data_dir}/meta``: a data_dir that x-prepro
    has not written names data_dir, its value, where it was set, and x-prepro."""
    monkeypatch.chdir(tmp_path)
    config = train_config(tmp_path / "t.hjson", "outputs/no_data", tmp_path / "run")
    capsys.readouterr()
    code = run_chain(["x-train", str(config), "--dry"])
    assert_one_line(code, capsys.readouterr().err, 2,
                    f"{config}: key '__parent__': '${{data_dir}}/meta' resolves to 'outputs/no_data/meta'",
                    f"data_dir = 'outputs/no_data' (set in {config})", str(tmp_path / "outputs/no_data/meta.hjson"),
                    "then in the working directory", "run x-prepro with this data_dir first, or fix data_dir")


def test_a_data_dir_without_meta_and_no_parent_is_one_problem(tmp_path, capsys, monkeypatch):
    """Without the __parent__, the missing data facts (processor, tokenizer, max_len...) are not listed one by
    one: the one problem is data_dir."""
    monkeypatch.chdir(tmp_path)
    config = train_config(tmp_path / "t.hjson", "outputs/no_data", tmp_path / "run", __parent__=...)
    capsys.readouterr()
    code = run_chain(["x-train", str(config), "--dry"])
    assert_one_line(code, capsys.readouterr().err, 2, f"{config}: key 'data_dir': 'outputs/no_data' "
                    f"({tmp_path / 'outputs/no_data'}: a relative data_dir is relative to the working directory) "
                    "holds no meta.hjson", "run x-prepro with this data_dir first")
