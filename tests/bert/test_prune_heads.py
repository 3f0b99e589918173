"""x-script prune_heads on a tiny trained BERT: the importance against an independent gradient, the heads
gone from the weights, and x-eval on the pruned run giving the gated model's numbers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from tests.bert.conftest import TINY_BERT
from xdpx.cli import run_chain, x_script

HEAD_SIZE = 8  # hidden 32 / 4 heads


@pytest.fixture(scope="module")
def bert_run(reviews_bert: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("prune")
    config = root / "train.hjson"
    config.write_text(json.dumps({"__parent__": "${data_dir}/meta", "data_dir": str(reviews_bert),
                                  "save_dir": str(root / "run"), "model": "bert_classification",
                                  "loss": "cross_entropy", **TINY_BERT, "batch_size": 16, "learning_rate": 1e-3,
                                  "max_update": 8, "eval_interval": 8, "major_metric": "accuracy", "seed": 3,
                                  "viz": False}))
    assert run_chain(["x-train", str(config)]) == 0
    return root / "run"


def importance_by_hand(run: Path) -> list[list[float]]:
    """|d loss / d gate| per head without gates: a gate g on head h's output is a factor on the columns of
    the output projection that read it, so the derivative at g = 1 is sum(grad W * W) over those columns."""
    from xdpx.data.dataset import open_split
    from xdpx.export.loading import load_run

    loaded = load_run(str(run))
    data = open_split(loaded.args.data_dir, "dev")
    batch = loaded.processor.collate([data[i] for i in range(len(data))])
    loss, _, _ = loaded.task.loss(loaded.model, batch)
    loss.backward()
    scores = []
    for layer in loaded.model.bert.encoder.layer:
        dense = layer.attention.output.dense
        per_head = (dense.weight.grad * dense.weight).detach().view(32, 4, HEAD_SIZE).sum(dim=(0, 2)).abs() / len(data)
        scores.append((per_head / per_head.norm()).tolist())
    return scores


def read_importance(out: Path) -> list[tuple[int, int, float, bool]]:
    lines = (out / "head_importance.tsv").read_text().splitlines()
    assert lines[0] == "layer\thead\timportance\tpruned"
    return [(int(a), int(b), float(c), d == "yes") for a, b, c, d in (line.split("\t") for line in lines[1:])]


def loss_of(text: str, when: str) -> float:
    return float(re.search(rf"{when}.*?loss ([0-9.]+)", text).group(1))


def test_prune_heads_removes_the_least_important_heads_into_a_run_x_eval_loads(bert_run, tmp_path, capsys):
    out = tmp_path / "pruned"
    assert x_script(["prune_heads", str(bert_run), str(out), "--heads", "3", "--batch-size", "64"]) == 0
    printed = capsys.readouterr().out

    # importance: every head, normalised per layer, equal to the independent gradient
    rows = read_importance(out)
    assert [(layer, head) for layer, head, _, _ in rows] == [(layer, h) for layer in range(2) for h in range(4)]
    by_hand = importance_by_hand(bert_run)
    for layer, head, value, _ in rows:
        assert value == pytest.approx(by_hand[layer][head], rel=1e-3, abs=1e-6)
    # the three lowest go (each layer keeps a head)
    pruned = sorted((value, layer, head) for layer, head, value, gone in rows if gone)
    kept = [value for _, _, value, gone in rows if not gone]
    assert len(pruned) == 3 and max(v for v, _, _ in pruned) <= min(kept)

    # the heads are gone from the saved weights and args.py names them
    from xdpx.config.writers import read_args
    from xdpx.models.checkpoints import load_torch

    expected = {str(layer): sorted(h for _, at, h in pruned if at == layer) for layer in range(2)}
    expected = {k: v for k, v in expected.items() if v}
    assert read_args(str(out / "args.py"))["pruned_heads"] == expected
    weights = load_torch(str(out / json.loads((out / "checkpoints.json").read_text())["best"]))
    for layer in range(2):
        width = (4 - len(expected.get(str(layer), []))) * HEAD_SIZE
        prefix = f"bert.encoder.layer.{layer}.attention."
        for name in ("query", "key", "value"):
            assert weights[prefix + f"self.{name}.weight"].shape == (width, 32)
            assert weights[prefix + f"self.{name}.bias"].shape == (width,)
        assert weights[prefix + "output.dense.weight"].shape == (32, width)

    # x-eval loads the pruned run and gives the numbers the tool printed after pruning
    config = tmp_path / "eval.hjson"
    config.write_text(json.dumps({"save_dir": str(out), "valid_subset": "dev"}))
    assert run_chain(["x-eval", str(config)]) == 0
    evaluated = capsys.readouterr().out
    assert loss_of(evaluated, "x-eval dev") == pytest.approx(loss_of(printed, "after"), abs=1e-6)
    # and that is the original model with those heads' outputs set to zero
    assert loss_of(printed, "after") == pytest.approx(gated_loss(bert_run, expected), abs=1e-5)

    # pruning the pruned run again keeps the original head numbers
    again = tmp_path / "again"
    assert x_script(["prune_heads", str(out), str(again), "--heads", "1", "--batch-size", "64"]) == 0
    twice = read_args(str(again / "args.py"))["pruned_heads"]
    assert sum(map(len, twice.values())) == 4 and all(set(v) <= set(twice[k]) for k, v in expected.items())


def gated_loss(run: Path, zeroed: dict[str, list[int]]) -> float:
    from xdpx.data.dataset import open_split
    from xdpx.export.loading import load_run

    loaded = load_run(str(run))
    for layer, heads in zeroed.items():
        dense = loaded.model.bert.encoder.layer[int(layer)].attention.output.dense
        with torch.no_grad():
            for h in heads:
                dense.weight[:, h * HEAD_SIZE:(h + 1) * HEAD_SIZE] = 0
    data = open_split(loaded.args.data_dir, "dev")
    with torch.no_grad():
        loss, size, _ = loaded.task.loss(loaded.model, loaded.processor.collate([data[i] for i in range(len(data))]))
    return float(loss) / size


def test_prune_heads_refuses_to_empty_a_layer_and_a_model_without_heads(bert_run, tmp_path, capsys):
    assert x_script(["prune_heads", str(bert_run), str(tmp_path / "x"), "--heads", "7"]) == 1
    assert "at most 6 can go" in capsys.readouterr().err and not (tmp_path / "x").exists()
    assert x_script(["prune_heads", str(bert_run), str(tmp_path / "y")]) == 2  # --heads is required
