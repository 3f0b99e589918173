"""Every optional package, when missing, ends the real command with one line naming the install that fixes
it: the documented exit code (xdpx.errors), no traceback.

Each case runs a command in a fresh interpreter where the package cannot be imported (``sys.modules[name]
= None``, what Python does for a package that is not there), through the same entry function as the
console script. The data is the committed review sample and one tiny BERT run trained once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from xdpx.cli import run_chain
from xdpx.errors import EXIT_CONFIG, EXIT_FAILED

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "examples/data/sample"
VOCAB = str(SAMPLE / "vocab/chinese_vocab.txt")
TINY_BERT = {"model": "bert_classification", "loss": "cross_entropy", "major_metric": "accuracy",
             "pretrained_model": None, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
             "intermediate_size": 32, "max_position_embeddings": 64, "batch_size": 16, "max_update": 2,
             "eval_interval": 2, "log_interval": 2, "learning_rate": 1e-3}
ENTRY = {"x-prepro": "x_prepro", "x-train": "x_train", "x-pred": "x_pred", "x-io": "x_io",
         "x-script": "x_script_entry"}
# runs a console script's entry function with the named packages made unimportable
PROLOG = """import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None
entry = sys.argv[2]
sys.argv = sys.argv[3:]
from xdpx import cli
getattr(cli, entry)()
"""


def write(path: Path, config: dict) -> str:
    path.write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def bert_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny bert_classification run on the review sample (2 updates): every export and x-pred can load it."""
    root = tmp_path_factory.mktemp("optional")
    prepro = write(root / "prepro.hjson", {"__parent__": str(REPO / "examples/prepro/reviews_bert"),
                                           "data_source": str(SAMPLE / "reviews"), "vocab_file": VOCAB,
                                           "data_dir": str(root / "data"), "workers": 1, "max_len": 32,
                                           "__ignore__": ["threshold"]})
    assert run_chain(["x-prepro", prepro]) == 0
    train = write(root / "train.hjson", {"__parent__": "${data_dir}/meta", "data_dir": str(root / "data"),
                                         "save_dir": str(root / "run"), **TINY_BERT})
    assert run_chain(["x-train", train]) == 0
    return root / "run"


def run_without(blocked: str, command: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PROLOG, blocked, ENTRY[command], command, *args],
                          capture_output=True, text=True, cwd=cwd, timeout=300)


def assert_one_line(result: subprocess.CompletedProcess, code: int, install: str, package: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == code, (result.returncode, result.stderr)
    assert len(lines) == 1, result.stderr
    assert f"needs the optional package {package}: {install}" in lines[0], lines[0]


EXPORTS = [  # (blocked packages, tool, extra config, install line, package named)
    ("onnx,onnxruntime,onnxscript", "export_onnx", {}, "pip install 'xdpx[onnx]'", "onnx"),
    ("tensorflow", "export_tf", {}, "pip install 'xdpx[tf]'", "tensorflow-cpu"),
    ("transformers", "export_hf", {}, "pip install 'xdpx[hf]'", "transformers"),
]


@pytest.mark.parametrize("blocked, tool, extra, install, package", EXPORTS, ids=[e[1] for e in EXPORTS])
def test_export_without_its_package(bert_run: Path, tmp_path: Path, blocked: str, tool: str, extra: dict,
                                    install: str, package: str) -> None:
    config = write(tmp_path / "export.hjson", {"save_dir": str(bert_run), "out_dir": str(tmp_path / "out"),
                                               "parity_samples": 4, **extra})
    assert_one_line(run_without(blocked, "x-script", tool, config, cwd=tmp_path), EXIT_FAILED, install, package)


@pytest.mark.parametrize("scheme, backend", [("s3", "s3fs"), ("oss", "ossfs")])
def test_object_store_path_without_its_backend(tmp_path: Path, scheme: str, backend: str) -> None:
    result = run_without(backend, "x-io", "ls", f"{scheme}://bucket/folder", cwd=tmp_path)
    assert_one_line(result, EXIT_FAILED, f"pip install 'xdpx[{scheme}]'", backend)
    assert f"{scheme}://bucket/folder" in result.stderr


def test_chain_output_on_s3_without_s3fs(tmp_path: Path) -> None:
    """x-prepro's data_dir on S3: the config check meets the missing backend, before any work (exit 2)."""
    config = write(tmp_path / "prepro.hjson", {"__parent__": str(REPO / "examples/prepro/reviews_char"),
                                               "data_source": str(SAMPLE / "reviews"), "data_dir": "s3://bucket/data"})
    result = run_without("s3fs", "x-prepro", config, cwd=tmp_path)
    assert_one_line(result, EXIT_CONFIG, "pip install 'xdpx[s3]'", "s3fs")
    assert "key 'data_dir'" in result.stderr


def test_sql_and_parquet_inputs_without_their_readers(bert_run: Path, tmp_path: Path) -> None:
    parquet = tmp_path / "reviews.parquet"
    parquet.write_bytes(b"PAR1")  # never read: the missing reader is found first
    for blocked, source, install, package in [
            ("sqlalchemy", f"sqlite:///{tmp_path / 'r.db'}?table=reviews", "pip install 'xdpx[sql]'", "sqlalchemy"),
            ("pyarrow", str(parquet), "pip install 'xdpx[parquet]'", "pyarrow")]:
        config = write(tmp_path / f"pred_{blocked}.hjson", {
            "save_dir": str(bert_run), "predict_file_map": {source: str(tmp_path / f"{blocked}.tsv")}})
        result = run_without(blocked, "x-pred", config, cwd=tmp_path)
        assert_one_line(result, EXIT_FAILED, install, package)
        assert not (tmp_path / f"{blocked}.tsv").exists()


@pytest.mark.parametrize("blocked, option, install, package", [
    ("tensorboard", {"tensorboard": True}, "pip install 'xdpx[tensorboard]'", "tensorboard"),
    ("mlflow", {"callbacks": ["mlflow"]}, "pip install 'xdpx[mlflow]'", "mlflow-skinny"),
])
def test_training_option_without_its_package(bert_run: Path, tmp_path: Path, blocked: str, option: dict,
                                             install: str, package: str) -> None:
    """A config check: exit 2 before any work (no run directory)."""
    data_dir = bert_run.parent / "data"
    config = write(tmp_path / "train.hjson", {"__parent__": "${data_dir}/meta", "data_dir": str(data_dir),
                                              "save_dir": str(tmp_path / "run"), **TINY_BERT, **option})
    assert_one_line(run_without(blocked, "x-train", config, cwd=tmp_path), EXIT_CONFIG, install, package)
    assert not (tmp_path / "run").exists()


def test_jieba_tokenizer_without_jieba(tmp_path: Path) -> None:
    config = write(tmp_path / "prepro.hjson", {"__parent__": str(REPO / "examples/prepro/reviews_char"),
                                               "data_source": str(SAMPLE / "reviews"), "tokenizer": "jieba",
                                               "data_dir": str(tmp_path / "data"), "workers": 1})
    result = run_without("jieba", "x-prepro", config, cwd=tmp_path)
    assert_one_line(result, EXIT_FAILED, "pip install 'xdpx[jieba]'", "jieba")
