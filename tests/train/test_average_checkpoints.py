"""x-script average_checkpoints: the hand average of the chosen checkpoints, usable by x-eval, and safe."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch
from train_helpers import train, write_config

from xdpx.cli import run_chain, x_script
from xdpx.models.checkpoints import load_torch


def read_tsv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


@pytest.fixture(scope="module")
def run(reviews: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("average")
    # loss as major metric: its values never tie, so the ranking below is unambiguous
    config = write_config(root / "train.hjson", reviews, root / "run", max_epoch=2, eval_interval=6, viz=False,
                          major_metric="loss", ascending_metric=False)
    assert train(config) == 0
    return root / "run"


def script(*argv: str) -> int:
    return x_script(["average_checkpoints", *argv])


def assert_hand_average(out: Path, checkpoints: list[Path]) -> None:
    averaged = load_torch(str(out))
    loaded = [load_torch(str(p)) for p in checkpoints]
    assert averaged.keys() == loaded[0].keys()
    for key, value in averaged.items():
        by_hand = sum(weights[key] for weights in loaded) / len(loaded)
        assert value.dtype == loaded[0][key].dtype
        assert torch.allclose(value, by_hand, rtol=0, atol=1e-6), key
        assert not any(torch.equal(value, weights[key]) for weights in loaded), f"{key}: not averaged"


def test_last_n_is_the_hand_average_and_x_eval_scores_it(run, tmp_path):
    steps = sorted(int(p.stem.split("-")[1]) for p in run.glob("checkpoint-*.pt"))
    assert steps == [6, 12, 18, 24, 30]
    out = tmp_path / "avg.pt"
    assert script(str(run), "--last", "3", "--out", str(out)) == 0
    assert_hand_average(out, [run / f"checkpoint-{s}.pt" for s in (18, 24, 30)])
    eval_config = tmp_path / "eval.hjson"
    eval_config.write_text(json.dumps({"save_dir": str(run), "valid_subset": "dev", "checkpoint": str(out),
                                       "save_to_file": str(tmp_path / "scores.tsv")}))
    assert run_chain(["x-eval", str(eval_config)]) == 0
    [row] = read_tsv(tmp_path / "scores.tsv")
    assert row["checkpoint"].endswith("avg.pt")
    assert row["loss"] not in {r["loss"] for r in read_tsv(run / "valid.log.tsv")}


def test_best_k_follows_the_major_metric_of_valid_log(run, tmp_path):
    rows = read_tsv(run / "valid.log.tsv")
    best = sorted(rows, key=lambda r: float(r["loss"]))[:2]
    assert script(str(run), "--best", "2") == 0
    out = run / "averaged-best-2.pt"
    assert_hand_average(out, [run / f"checkpoint-{r['step']}.pt" for r in best])
    # <best> and <last> still name x-train's checkpoints
    assert json.loads((run / "checkpoints.json").read_text())["last"] == "checkpoint-30.pt"
    # running it again replaces its own output
    assert script(str(run), "--best", "2") == 0


def test_refuses_to_overwrite_a_checkpoint_or_to_average_more_than_exist(run, tmp_path):
    target = run / "checkpoint-30.pt"
    before = target.read_bytes()
    assert script(str(run), "--last", "2", "--out", str(target)) == 2
    assert target.read_bytes() == before
    assert script(str(run), "--last", "9", "--out", str(tmp_path / "x.pt")) != 0
    assert not (tmp_path / "x.pt").exists()
    assert script(str(run), "--last", "2", "--best", "2") == 2


def test_help_prints_the_usage(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert script("--help") == 0
    assert "usage: x-script average_checkpoints SAVE_DIR (--last N | --best K) [--out PATH]" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []
