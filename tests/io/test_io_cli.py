"""x-io: each operation from the shell, typed arguments, printed results, clean failures.

A few runs go through a real subprocess (``python -m xdpx.io.cli`` and the ``x-io`` console script)
pointed at the moto server by an io config file in ``XDPX_IO_CONFIG``; the rest call ``main(argv)``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from xdpx.io import testing
from xdpx.io.cli import main as x_io


@pytest.fixture
def io_env(s3_endpoint: str, tmp_path) -> dict[str, str]:
    """Environment for a subprocess: s3:// on the moto server through an io config file."""
    cfg = tmp_path / "io.json"
    cfg.write_text(json.dumps({"s3": {"endpoint_url": s3_endpoint, "key": testing.FAKE_KEY,
                                      "secret": testing.FAKE_SECRET}}))
    env = dict(os.environ)
    for var in [v for v in env if v.startswith("AWS_")]:
        del env[var]  # the config file alone must be enough
    env.update(XDPX_IO_CONFIG=str(cfg), AWS_EC2_METADATA_DISABLED="true")
    return env


def run(env: dict[str, str], *args: str, script: bool = False) -> subprocess.CompletedProcess[str]:
    cmd = [shutil.which("x-io") or "x-io"] if script else [sys.executable, "-m", "xdpx.io.cli"]
    return subprocess.run([*cmd, *args], env=env, capture_output=True, text=True, timeout=60)


def test_round_trip_through_s3_in_subprocesses(io_env, s3_root, tmp_path):
    src = tmp_path / "hello.txt"
    src.write_text("hello x-io\n")
    r = run(io_env, "copy", str(src), f"{s3_root}/dir/")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"{s3_root}/dir/hello.txt"

    r = run(io_env, "ls", f"{s3_root}/dir")
    assert (r.returncode, r.stdout) == (0, "hello.txt\n"), r.stderr
    r = run(io_env, "exists", f"{s3_root}/dir/hello.txt", script=shutil.which("x-io") is not None)
    assert (r.returncode, r.stdout) == (0, "true\n"), r.stderr
    r = run(io_env, "exists", f"{s3_root}/dir/nope.txt")
    assert (r.returncode, r.stdout) == (0, "false\n"), r.stderr

    r = run(io_env, "cp", f"{s3_root}/dir/hello.txt", str(tmp_path / "back.txt"), "false")  # progress=false
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert (tmp_path / "back.txt").read_text() == "hello x-io\n"

    r = run(io_env, "cat", f"{s3_root}/dir/missing.txt")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == f"x-io: error: No such file or directory: {s3_root}/dir/missing.txt\n"
    assert "Traceback" not in r.stderr and testing.FAKE_SECRET not in r.stderr + r.stdout


def test_typed_results(s3_root, tmp_path, capsys):
    (tmp_path / "a.txt").write_text("12345")
    assert x_io(["copy", str(tmp_path / "a.txt"), f"{s3_root}/a.txt"]) == 0
    capsys.readouterr()
    assert x_io(["size", f"{s3_root}/a.txt"]) == 0
    assert capsys.readouterr().out == "5\n"
    assert x_io(["md5", f"{s3_root}/a.txt", "false"]) == 0
    remote_md5 = capsys.readouterr().out
    assert x_io(["md5", str(tmp_path / "a.txt")]) == 0
    assert capsys.readouterr().out == remote_md5 == "827ccb0eea8a706c4c34a16891f84e7b\n"
    assert x_io(["last_modified", f"{s3_root}/a.txt"]) == 0
    assert float(capsys.readouterr().out) > 1.7e9
    assert x_io(["isdir", s3_root]) == 0 and capsys.readouterr().out == "true\n"
    assert x_io(["isfile", s3_root]) == 0 and capsys.readouterr().out == "false\n"
    assert x_io(["is_writable", f"{s3_root}/new.txt"]) == 0 and capsys.readouterr().out == "true\n"
    assert x_io(["glob", f"{s3_root}/*.txt"]) == 0 and capsys.readouterr().out == f"{s3_root}/a.txt\n"
    assert x_io(["cat", f"{s3_root}/a.txt"]) == 0 and capsys.readouterr().out == "12345"
    assert x_io(["copytree", str(tmp_path), f"{s3_root}/tree"]) == 0
    assert x_io(["ls", f"{s3_root}/tree"]) == 0 and capsys.readouterr().out.split() == [f"{s3_root}/tree", "a.txt"]
    assert x_io(["rmtree", f"{s3_root}/tree"]) == 0
    assert x_io(["mv", f"{s3_root}/a.txt", f"{s3_root}/b.txt"]) == 0
    assert x_io(["rm", f"{s3_root}/b.txt"]) == 0
    capsys.readouterr()
    assert x_io(["exists", f"{s3_root}/b.txt"]) == 0 and capsys.readouterr().out == "false\n"


def test_false_is_a_bool(tmp_path, capsys):
    d = str(tmp_path / "d")
    assert x_io(["mkdir", d]) == 0
    assert x_io(["makedirs", d, "true"]) == 0  # exist_ok=true
    assert x_io(["makedirs", d, "false"]) == 1  # exist_ok=false: the directory exists
    assert capsys.readouterr().err == f"x-io: error: File exists: {d}\n"
    assert x_io(["makedirs", d, "maybe"]) == 2
    assert "must be true or false" in capsys.readouterr().err


def test_usage_errors(capsys):
    assert x_io([]) == 2 and "usage: x-io COMMAND" in capsys.readouterr().out
    assert x_io(["--help"]) == 0 and "copytree" in capsys.readouterr().out
    assert x_io(["frobnicate", "x"]) == 2 and "unknown command 'frobnicate'" in capsys.readouterr().err
    assert x_io(["exists"]) == 2 and "exists takes PATH (got 0 argument(s))" in capsys.readouterr().err
    assert x_io(["copy", "a", "b", "true", "extra"]) == 2
    assert x_io(["copy", "--help"]) == 0 and "usage: x-io copy SRC DST [PROGRESS]" in capsys.readouterr().out


def test_missing_local_file(tmp_path, capsys):
    missing = str(tmp_path / "missing.txt")
    assert x_io(["copy", missing, str(tmp_path / "x")]) == 1
    assert capsys.readouterr().err == f"x-io: error: No such file or directory: {missing}\n"
