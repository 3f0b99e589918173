"""docs/architecture.md's "Extend XDPX" example, followed word for word: its files are written from the page's
code blocks (``# file: ...`` / ``// file: ...``), then the user_dir encoder, loss and task train, evaluate and
serve. Each command runs in a process of its own, so the user's registrations never leak into other tests."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import hjson
from inference_helpers import REPO, SAMPLE
from serve_helpers import request, running_server

PAGE = REPO / "docs/architecture.md"
SECTION = "## Extend XDPX: an encoder, a head, a loss, a task, a tool"
BLOCK = re.compile(r"```(?:python|hjson)\n(?:#|//) file: (\S+)\n(.*?)```", re.S)


def example_files() -> dict[str, str]:
    text = PAGE.read_text(encoding="utf-8")
    assert SECTION in text, f"{PAGE.name} lost its section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return {name: body for name, body in BLOCK.findall(section)}


def run(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    code = f"import sys; from xdpx.cli import run_chain; sys.exit(run_chain({list(argv)!r}))"
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_the_extension_example_trains_evaluates_and_serves(prepared, tmp_path: Path) -> None:
    files = example_files()
    assert sorted(files) == ["my_components/__init__.py", "my_components/bag_encoder.py",
                             "my_components/confidence_task.py", "my_components/poly_loss.py", "train_bag.hjson"]
    for name, body in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body, encoding="utf-8")

    # the page's config as written; only where the data is, and fewer updates (a test's budget)
    config = hjson.loads(files["train_bag.hjson"])
    assert (config["encoder"], config["loss"], config["task"], config["user_dir"]) == \
        ("bag", "poly1_ce", "with_confidence", "my_components")
    config.update(data_dir=str(prepared("reviews_char")), max_update=20, eval_interval=10)
    (tmp_path / "train_bag.hjson").write_text(json.dumps(config), encoding="utf-8")
    trained = run("x-train", "train_bag.hjson", cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr[-3000:]

    save_dir = tmp_path / config["save_dir"]
    with open(save_dir / "valid.log.tsv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert [row["step"] for row in rows] == ["10", "20"]
    assert all(0.5 <= float(row["confidence"]) <= 1.0 for row in rows)  # the task's metric, at each evaluation
    args = (save_dir / "args.py").read_text(encoding="utf-8")
    assert "'encoder': 'bag'" in args and "'poly_epsilon': 1.0" in args and "'bag_dim': 64" in args

    (tmp_path / "eval.hjson").write_text(json.dumps({"save_dir": str(save_dir), "valid_subset": "dev",
                                                             "user_dir": "my_components"}))
    evaluated = run("x-eval", "eval.hjson", cwd=tmp_path)
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert re.search(r"x-eval dev \(60 samples\): .*confidence 0\.\d+", evaluated.stdout), evaluated.stdout

    texts = [line.split("\t")[0] for line in (SAMPLE / "reviews/test.txt").read_text(encoding="utf-8").splitlines()][:3]
    with running_server(save_dir, "--trust-user-dir") as server:
        status, answer, _ = request(server.address, "POST", "/predict", json.dumps(texts).encode("utf-8"))
    assert status == 200, answer
    labels = set((save_dir / "target_map.txt").read_text(encoding="utf-8").split())
    assert len(answer) == 3 and all(a["label"] in labels for a in answer), answer

    # the run's folder of components gone (another machine): one line that says so, no traceback
    (tmp_path / "my_components").rename(tmp_path / "moved")
    (tmp_path / "eval2.hjson").write_text(json.dumps({"save_dir": str(save_dir), "valid_subset": "dev",
                                                      "trust_user_dir": True}))
    missing = run("x-eval", "eval2.hjson", cwd=tmp_path)
    assert missing.returncode == 1 and "Traceback" not in missing.stderr, missing.stderr[-3000:]
    assert f"user_dir '{tmp_path / 'my_components'}' is not a directory on this machine" in missing.stderr
