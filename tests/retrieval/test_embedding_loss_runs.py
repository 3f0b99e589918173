"""Short real x-train runs of the embedding loss families on the committed STS-B retrieval sample (cosent with
Matryoshka widths, triplet, margin_mse on a teacher's scores), and the configs that cannot work refused by
x-train --dry with exit 2 and the key to fix."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from retrieval_helpers import SAMPLE, prepro, train_config

from xdpx.cli import run_chain


def read_tsv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def train(root: Path, data: Path, **overrides: object) -> list[dict[str, str]]:
    root.mkdir()
    config = train_config(root, data, max_update=4, eval_interval=4, resume=False, **overrides)
    assert run_chain(["x-train", str(config)]) == 0
    return read_tsv(root / "run/valid.log.tsv")


@pytest.fixture(scope="module")
def teacher_triplets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """query, positive, hard negative (the next pair's positive), score, and a teacher's two scores: the
    pair's score for (query, positive) and 1.5 for (query, negative)."""
    root = tmp_path_factory.mktemp("teacher")
    (root / "source").mkdir()
    for split in ("train", "dev"):
        rows = [line.split("\t") for line in (SAMPLE / f"{split}.tsv").read_text().splitlines()]
        lines = [f"{q}\t{p}\t{rows[(i + 1) % len(rows)][1]}\t{s}\t{s}\t1.5" for i, (q, p, s) in enumerate(rows)]
        (root / "source" / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    return prepro(root, data_source=str(root / "source"), data_files={"train.tsv": "train", "dev.tsv": "dev"},
                  loader="triplet", label_column=3, teacher_logits=True, num_logits=2)


def test_cosent_trains_each_matryoshka_width_and_x_eval_reports_them_as_logged(retrieval_data, tmp_path):
    [row] = train(tmp_path / "cosent", retrieval_data, loss="cosent", matryoshka_dims=[32, 8],
                  matryoshka_weights=[1.0, 0.5], major_metric="recall_at_10@8")
    widths = [f"{name}@{d}" for d in (32, 8) for name in ("recall_at_1", "recall_at_10", "mrr", "pearson")]
    assert set(widths) <= set(row) and row["best_recall_at_10@8"] == row["recall_at_10@8"]
    assert row["recall_at_10@32"] == row["recall_at_10"]  # the full width is the plain metric
    assert 0 < float(row["mrr@8"]) <= 1 and float(row["loss"]) > 0
    out = tmp_path / "scores.tsv"
    (tmp_path / "eval.json").write_text(json.dumps({"save_dir": str(tmp_path / "cosent/run"), "valid_subset": ["dev"],
                                                    "save_to_file": str(out)}))
    assert run_chain(["x-eval", str(tmp_path / "eval.json")]) == 0
    [evaluated] = read_tsv(out)
    assert [evaluated[c] for c in ["loss", *widths]] == [row[c] for c in ["loss", *widths]]


def test_triplet_and_margin_mse_train_on_triplets_with_a_teachers_scores(teacher_triplets, tmp_path):
    [row] = train(tmp_path / "triplet", teacher_triplets, loss="triplet", distance="euclidean", margin=1.0)
    assert {"recall_at_1", "recall_at_10", "mrr"} <= set(row) and float(row["train_loss"]) > 0
    [row] = train(tmp_path / "margin", teacher_triplets, loss="margin_mse", major_metric="mrr")
    # the dev split carries the teacher's scores too: its loss is their margin MSE
    assert float(row["loss"]) > 0 and float(row["train_loss"]) > 0 and 0 < float(row["mrr"]) <= 1
    # a raw file without them: loss 0 (nothing to regress on), the retrieval metrics as on the split
    source = teacher_triplets.parent / "source/dev.tsv"
    (tmp_path / "plain.tsv").write_text("".join("\t".join(line.split("\t")[:4]) + "\n"
                                                for line in source.read_text().splitlines()))
    (tmp_path / "eval.json").write_text(json.dumps({"save_dir": str(tmp_path / "margin/run"), "save_to_file":
                                                    str(tmp_path / "e.tsv"), "valid_subset": [str(tmp_path / "plain.tsv")]}))
    assert run_chain(["x-eval", str(tmp_path / "eval.json")]) == 0
    [plain] = read_tsv(tmp_path / "e.tsv")
    assert float(plain["loss"]) == 0 and plain["mrr"] == row["mrr"]


def dry(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = run_chain(["x-train", str(path), "--dry"])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize("overrides, message", [
    ({"loss": "triplet"}, "triplet needs an anchor, a positive and a negative per sample: prepare the data with "
                          "loader: triplet"),
    ({"loss": "margin_mse"}, "margin_mse regresses onto a teacher's margins: prepare the data with loader: "
                             "triplet and teacher_logits: true"),
    ({"loss": "angle", "matryoshka_dims": [32, 15]}, "every width of matryoshka_dims must be even"),
    ({"loss": "cosent", "matryoshka_dims": [64, 16]}, "matryoshka_dims: each width must be at most the embedding "
                                                      "width (hidden_size 32), got 64"),
    ({"loss": "cosent", "matryoshka_dims": [32, 16], "matryoshka_weights": [1.0]},
     "matryoshka_weights needs one weight per width of matryoshka_dims"),
    ({"loss": "info_nce", "major_metric": "mrr@8"}, "major_metric is not reported with this loss"),
    ({"loss": "angle", "cosent_weight": 0.0, "angle_weight": 0.0}, "cosent_weight and angle_weight are both 0"),
])
def test_a_config_that_cannot_work_is_refused_with_exit_2(retrieval_data, tmp_path, capsys, overrides, message):
    code, out = dry(train_config(tmp_path, retrieval_data, **overrides), capsys)
    assert code == 2 and message in out, out


def test_a_cosine_triplet_margin_of_2_or_more_is_refused(teacher_triplets, tmp_path, capsys):
    code, out = dry(train_config(tmp_path, teacher_triplets, loss="triplet", margin=2.0), capsys)
    assert code == 2 and "a cosine distance is at most 2, so margin >= 2 can never be met" in out, out


def test_contrastive_stops_at_a_label_that_is_not_0_or_1(retrieval_data, tmp_path, capsys):
    # the STS sample's labels are scores (4 to 5): one line naming the label and the fix, exit 1
    config = train_config(tmp_path, retrieval_data, loss="contrastive", max_update=2, resume=False)
    capsys.readouterr()
    assert run_chain(["x-train", str(config)]) == 1
    err = capsys.readouterr().err
    assert "x-train: error: contrastive reads labels 1 (similar) or 0 (dissimilar), got " in err
    assert "Traceback" not in err
