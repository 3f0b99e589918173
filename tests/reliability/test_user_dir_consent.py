"""Code that comes with a run is not imported unasked: x-eval, x-pred, x-serve and the exports refuse a run
whose args.py names a user_dir unless the user consents (``trust_user_dir: true``, ``--trust-user-dir``, or
their own ``user_dir``), and the refusal says what would be imported, from where, and how to consent.

The run's user_dir writes a marker file when it is imported (XDPX_TEST_MARKER). Each command runs in its
own process, so an import in one is never hidden by a module imported earlier. Before consent existed,
every one of these commands imported the folder silently (the marker appeared without consent).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from train_runs import REPO, train_config

from xdpx.cli import run_chain

PACKAGE = """import os

marker = os.environ.get("XDPX_TEST_MARKER")
if marker:  # the side effect a shared run's code could have on the machine that loads it
    with open(marker, "a") as f:
        f.write("imported\\n")
"""


@pytest.fixture(scope="module")
def shared_run(reviews: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A finished run whose args.py names a user_dir (the run directory and that folder)."""
    root = tmp_path_factory.mktemp("shared")
    package = root / "their_components"
    package.mkdir()
    (package / "__init__.py").write_text(PACKAGE)
    config = train_config(root / "t.hjson", reviews, root / "run", user_dir=str(package))
    assert run_chain(["x-train", str(config)]) == 0
    return root / "run", package


def run_entry(entry: str, *argv: str, marker: Path, stdin: str = "", timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDPX_TEST_MARKER": str(marker), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    return subprocess.run([sys.executable, "-c", f"from xdpx.cli import {entry}; {entry}()", *argv], input=stdin,
                          capture_output=True, text=True, env=env, timeout=timeout)


def assert_refused(result: subprocess.CompletedProcess, run: Path, package: Path, marker: Path, how: str) -> None:
    assert result.returncode == 1, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 1, result.stderr
    line = errors[0]
    assert repr(str(package)) in line and str(run / "args.py") in line and how in line, line
    assert not marker.exists(), "the run's user_dir was imported without consent"


def write(path: Path, config: dict) -> Path:
    path.write_text(json.dumps(config))
    return path


def eval_and_pred_configs(run: Path, tmp_path: Path, **consent: object) -> list[tuple[str, Path, Path]]:
    """(entry point, config, output it writes) for x-eval and x-pred of the run."""
    scores, predictions = tmp_path / "scores.tsv", tmp_path / "pred.tsv"
    common = {"save_dir": str(run), "cuda": False, **consent}
    return [("x_eval", write(tmp_path / "eval.hjson", {**common, "valid_subset": "dev", "save_to_file": str(scores)}),
             scores),
            ("x_pred", write(tmp_path / "pred.hjson", {**common, "predict_file_map": {"dev": str(predictions)}}),
             predictions)]


@pytest.mark.parametrize("dry", [False, True])
def test_x_eval_and_x_pred_refuse_a_runs_user_dir_without_consent(shared_run, tmp_path, dry):
    run, package = shared_run
    for entry, config, output in eval_and_pred_configs(run, tmp_path):
        marker = tmp_path / f"{entry}.marker"
        result = run_entry(entry, str(config), *(["--dry"] if dry else []), marker=marker)
        assert_refused(result, run, package, marker, "trust_user_dir: true")
        assert not output.exists()


@pytest.mark.parametrize("consent", ["trust", "own_user_dir"])
def test_x_eval_and_x_pred_import_it_with_consent(shared_run, tmp_path, consent):
    run, package = shared_run
    given = {"trust_user_dir": True} if consent == "trust" else {"user_dir": str(package)}
    for entry, config, output in eval_and_pred_configs(run, tmp_path, **given):
        marker = tmp_path / f"{entry}.marker"
        result = run_entry(entry, str(config), marker=marker)
        assert result.returncode == 0, result.stderr
        assert marker.exists() and output.exists()


def test_x_serve_interactive_refuses_without_the_flag_and_serves_with_it(shared_run, tmp_path):
    run, package = shared_run
    marker = tmp_path / "serve.marker"
    refused = run_entry("x_serve", str(run), "--cpu", "--threads", "1", marker=marker, stdin="很好\nquit\n")
    assert_refused(refused, run, package, marker, "--trust-user-dir")
    served = run_entry("x_serve", str(run), "--cpu", "--threads", "1", "--trust-user-dir", marker=marker,
                       stdin="很好\nquit\n")
    assert served.returncode == 0, served.stderr
    assert re.search(r"\t\d\.\d{4}\t\(", served.stdout), served.stdout  # label, probability, all classes
    assert marker.exists()


def test_x_serve_http_refuses_without_the_flag_and_serves_with_it(shared_run, tmp_path):
    run, package = shared_run
    marker = tmp_path / "http.marker"
    command = ["x_serve", str(run), "--port", "0", "--cpu", "--threads", "1"]
    refused = run_entry(*command, marker=marker, timeout=120)  # exits before it binds the port
    assert_refused(refused, run, package, marker, "--trust-user-dir")
    env = {**os.environ, "XDPX_TEST_MARKER": str(marker), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    process = subprocess.Popen([sys.executable, "-c", "from xdpx.cli import x_serve; x_serve()", *command[1:],
                                "--trust-user-dir"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env)
    try:
        found = re.search(r"http://([\d.]+):(\d+)", process.stdout.readline())
        assert found, process.stderr.read() if process.poll() is not None else "no address printed"
        body = json.dumps(["很好"]).encode()
        with urllib.request.urlopen(f"http://{found.group(1)}:{found.group(2)}/predict", data=body, timeout=60) as r:
            assert r.status == 200 and "label" in json.loads(r.read())[0]
        assert marker.exists()
    finally:
        process.terminate()
        process.wait(timeout=60)
        process.stdout.close()
        process.stderr.close()


def test_an_export_refuses_without_consent_and_exports_with_it(shared_run, tmp_path):
    pytest.importorskip("onnx", reason="the export of this test is export_onnx (pip install -e '.[onnx]')")
    run, package = shared_run
    marker = tmp_path / "export.marker"
    config = write(tmp_path / "export.hjson", {"save_dir": str(run), "out_dir": str(tmp_path / "onnx")})
    assert_refused(run_entry("x_script_entry", "export_onnx", str(config), marker=marker), run, package, marker,
                   "trust_user_dir: true")
    config = write(tmp_path / "export.hjson", {"save_dir": str(run), "out_dir": str(tmp_path / "onnx"),
                                               "trust_user_dir": True})
    exported = run_entry("x_script_entry", "export_onnx", str(config), marker=marker)
    assert exported.returncode == 0, exported.stderr
    assert marker.exists() and (tmp_path / "onnx" / "model.onnx").exists()
