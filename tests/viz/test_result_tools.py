"""x-script confusion_matrix, bce_threshold, diff_meta, diff_data and aggregate_results --folds on real
x-prepro outputs, x-pred files and training runs; the numbers are checked against hand counts and
brute-force searches."""

from __future__ import annotations

import csv
import json
import random
import statistics
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from viz_helpers import REPO, read_rows, train

from xdpx.cli import run_chain, x_script
from xdpx.scripts.bce_threshold import f_beta

REVIEWS = REPO / "examples/data/sample/reviews"


@pytest.fixture(scope="module")
def predictions(reviews: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """x-pred's TSV of a tiny trained run on the labelled dev file (60 reviews, neg/pos)."""
    root = tmp_path_factory.mktemp("pred")
    code, run = train(root, reviews, "run", max_epoch=2)
    assert code == 0
    config = root / "pred.hjson"
    out = root / "dev.pred.tsv"
    config.write_text(json.dumps({"save_dir": str(run), "predict_file_map": {str(REVIEWS / "dev.txt"): str(out)}}))
    assert run_chain(["x-pred", str(config)]) == 0
    return out


def read_tsv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


# ---- confusion_matrix --------------------------------------------------------------------------------------


def test_confusion_matrix_tsv_is_the_hand_count_and_the_png_is_readable(predictions, tmp_path, capsys):
    out = tmp_path / "cm"
    assert x_script(["confusion_matrix", str(predictions), str(out)]) == 0
    rows = read_tsv(predictions)
    by_hand = {(t, p): 0 for t in ("neg", "pos") for p in ("neg", "pos")}
    for row in rows:
        by_hand[row["label"], row["predict"]] += 1
    lines = [line.split("\t") for line in (tmp_path / "cm.tsv").read_text().splitlines()]
    assert lines[0] == ["true \\ predicted", "neg", "pos"]
    table = {(line[0], label): int(v) for line in lines[1:] for label, v in zip(lines[0][1:], line[1:])}
    assert table == by_hand and sum(table.values()) == 60
    assert capsys.readouterr().out.startswith("true \\ predicted\tneg\tpos\n")

    image = np.asarray(Image.open(tmp_path / "cm.png").convert("RGB"))
    assert image.shape[0] >= 300 and image.shape[1] >= 300
    colours = {tuple(c) for c in image.reshape(-1, 3)[:: 7]}
    assert len(colours) > 20 and image.std() > 20  # drawn, not a blank canvas
    # the four cells carry four different shades of blue when the counts differ
    if len(set(by_hand.values())) == 4:
        assert len({tuple(c) for c in image.reshape(-1, 3) if c[2] > c[0] + 30}) >= 4


def test_confusion_matrix_keeps_the_run_class_order_and_adds_unknown_labels(tmp_path):
    source = tmp_path / "p.tsv"
    source.write_text("text\tlabel\tpredict\tprob\tprob_b\tprob_a\tprob_c\n"
                      "x\ta\ta\t.5\t.2\t.5\t.3\n" "y\ta\tb\t.5\t.5\t.2\t.3\n" "z\tc\tb\t.5\t.5\t.2\t.3\n"
                      "w\td\tc\t.5\t.2\t.3\t.5\n" "v\tb\tb\t.5\t.5\t.2\t.3\n")
    assert x_script(["confusion_matrix", str(source), str(tmp_path / "m")]) == 0
    lines = [line.split("\t") for line in (tmp_path / "m.tsv").read_text().splitlines()]
    assert lines[0][1:] == ["b", "a", "c", "d"]
    assert lines[1:] == [["b", "1", "0", "0", "0"], ["a", "1", "1", "0", "0"], ["c", "1", "0", "0", "0"],
                         ["d", "0", "0", "1", "0"]]


def test_confusion_matrix_refuses_to_replace_a_file_it_did_not_write(predictions, tmp_path, capsys):
    (tmp_path / "mine.tsv").write_text("my notes\n")
    assert x_script(["confusion_matrix", str(predictions), str(tmp_path / "mine")]) == 2
    assert "XDPX did not write it" in capsys.readouterr().err
    assert (tmp_path / "mine.tsv").read_text() == "my notes\n" and not (tmp_path / "mine.png").exists()
    # what it wrote itself it may write again
    assert x_script(["confusion_matrix", str(predictions), str(tmp_path / "again")]) == 0
    assert x_script(["confusion_matrix", str(predictions), str(tmp_path / "again")]) == 0


# ---- bce_threshold -----------------------------------------------------------------------------------------


def brute_force(probs: list[float], positive: list[bool], beta: float) -> float:
    """The best F-beta over every threshold a search could use: each probability, and above them all."""
    best = 0.0
    for t in sorted(set(probs)) + [2.0]:
        tp = sum(p >= t and y for p, y in zip(probs, positive))
        fp = sum(p >= t and not y for p, y in zip(probs, positive))
        best = max(best, f_beta(tp, fp, sum(positive) - tp, beta))
    return best


def run_bce_threshold(capsys, *argv: str) -> list[dict[str, str]]:
    assert x_script(["bce_threshold", *argv]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[0].split("\t")
    return [dict(zip(header, line.split("\t"))) for line in lines[1:]]


@pytest.mark.parametrize("beta", [1.0, 2.0, 0.5])
def test_bce_threshold_matches_a_brute_force_search(tmp_path, capsys, beta):
    rng = random.Random(7)
    lines = ["label\tpredict\tprob\tprob_neg\tprob_pos"]
    probs, positive = [], []
    for _ in range(200):
        y = rng.random() < 0.3
        p = round(min(max(rng.gauss(0.62 if y else 0.4, 0.15), 0.0), 1.0), 2)  # rounded: ties on purpose
        probs.append(p)
        positive.append(y)
        lines.append(f"{'pos' if y else 'neg'}\t{'pos' if p >= .5 else 'neg'}\t{max(p, 1 - p)}\t{1 - p:.2f}\t{p}")
    source = tmp_path / "p.tsv"
    source.write_text("\n".join(lines) + "\n")
    [row] = run_bce_threshold(capsys, str(source), "--beta", str(beta))
    assert row["label"] == "pos"
    best = brute_force(probs, positive, beta)
    assert float(row[f"f{beta:g}"]) == pytest.approx(best, abs=1e-6)
    threshold = float(row["threshold"])
    tp = sum(p >= threshold and y for p, y in zip(probs, positive))
    fp = sum(p >= threshold and not y for p, y in zip(probs, positive))
    assert f_beta(tp, fp, sum(positive) - tp, beta) == pytest.approx(best, abs=1e-6)
    assert int(row["predicted_positive"]) == tp + fp
    assert float(row["precision"]) == pytest.approx(tp / (tp + fp), abs=1e-6)


def test_bce_threshold_on_real_predictions_per_label(predictions, capsys):
    rows = read_tsv(predictions)
    for label in ("pos", "neg"):
        [found] = run_bce_threshold(capsys, str(predictions), "--positive", label)
        probs = [float(r[f"prob_{label}"]) for r in rows]
        positive = [r["label"] == label for r in rows]
        assert float(found["f1"]) == pytest.approx(brute_force(probs, positive, 1.0), abs=1e-6)
    assert x_script(["bce_threshold", str(predictions), "--positive", "maybe"]) == 1
    assert "not one of the run's labels (neg, pos)" in capsys.readouterr().err


# ---- diff_meta and diff_data ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def short_reviews(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The review sample prepared again with max_len 20, a rarer-character cut and no test split."""
    root = tmp_path_factory.mktemp("short")
    config = root / "prepro.hjson"
    config.write_text(json.dumps({"__parent__": str(REPO / "examples/prepro/reviews_char"),
                                  "data_source": str(REVIEWS), "data_dir": str(root / "data"), "workers": 1,
                                  "max_len": 20, "threshold": 2, "data_files": ["train.txt", "dev.txt"]}))
    assert run_chain(["x-prepro", str(config)]) == 0
    return root / "data"


def test_diff_meta_names_vocabulary_sizes_splits_and_options(reviews, short_reviews, capsys):
    assert x_script(["diff_meta", str(reviews), str(short_reviews / "meta.hjson")]) == 0
    out = capsys.readouterr().out.splitlines()
    size_a = len((reviews / "vocab.txt").read_text().splitlines())
    size_b = len((short_reviews / "vocab.txt").read_text().splitlines())
    assert size_a > size_b
    assert f"vocab_size: {size_a} -> {size_b}" in out and f"vocab.txt: {size_a} -> {size_b} tokens" in out
    assert any(line.startswith(f"  only in A ({size_a - size_b}):") for line in out)
    assert "data_size.test: 60 -> (absent)" in out and "max_len: 200 -> 20" in out
    assert not any(line.startswith(("target_map", "processor", "data_size.train")) for line in out)

    assert x_script(["diff_meta", str(reviews), str(reviews)]) == 0
    assert capsys.readouterr().out.startswith("no differences")


def test_diff_meta_reports_a_changed_target_map(reviews, tmp_path, capsys):
    import shutil

    other = tmp_path / "other"
    shutil.copytree(reviews, other)
    (other / "target_map.txt").write_text("pos\nneg\nmixed\n")
    assert x_script(["diff_meta", str(reviews), str(other)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "target_map.txt: 2 -> 3 labels" in out and "  only in B (1): mixed" in out
    assert "  other id (2): 'neg' 0 -> 1, 'pos' 1 -> 0" in out


def test_diff_data_counts_and_decodes_the_first_differing_samples(reviews, short_reviews, capsys):
    assert x_script(["diff_data", str(reviews), str(short_reviews), "--show", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    counts = {line.split("\t")[0]: line.split("\t")[1:] for line in out[2:5]}
    assert counts["test"] == ["60", "(absent)", "60"]
    assert counts["train"][:2] == ["240", "240"] and counts["dev"][:2] == ["60", "60"]
    # reviews longer than 20 characters differ (cut), shorter ones only where a rare character became [UNK]
    lengths = [len(line.split("\t")[0]) for line in (REVIEWS / "dev.txt").read_text().splitlines()]
    assert sum(n > 20 for n in lengths) <= int(counts["dev"][2]) <= 60
    at = out.index("## dev: the first 2 of " + counts["dev"][2] + " differing samples")
    a_line, b_line = out[at + 1], out[at + 2]
    assert a_line.startswith("[0] A: 本 人 5 月 3 日 入 住") and a_line.endswith("-> neg")
    assert b_line.startswith("[0] B: 本 人 5 月 3 日 入 住") and len(b_line.split()) == 2 + 20 + 2
    at = out.index("## test: the first 2 of 60 differing samples")
    assert out[at + 2] == "[0] B: (none)"

    assert x_script(["diff_data", str(reviews), str(reviews)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "no differences"


# ---- aggregate_results --folds -----------------------------------------------------------------------------


def test_aggregate_results_folds_gives_mean_and_std_per_cross_validation_loop(reviews, tmp_path, capsys):
    base = tmp_path / "base.hjson"
    base.write_text(json.dumps({"__parent__": "${data_dir}/meta", "data_dir": str(reviews), "model": "cls_cnn",
                                "loss": "cross_entropy", "embedding_dim": 16, "num_filters": 8,
                                "kernel_sizes": [2, 3], "batch_size": 16, "max_epoch": 1, "eval_interval": 5,
                                "major_metric": "accuracy", "viz": False}))
    loop = tmp_path / "cv.hjson"
    loop.write_text(
        "{ __parent__: [ ./base\n"
        "    [ {__def__: {fold: dev}, train_subset: [train, test]} {__def__: {fold: test}, train_subset: [train, dev]} ]\n"
        "    [ {learning_rate: 0.01} {learning_rate: 0.003} ] ]\n"
        "  valid_subset: ${fold}\n"
        f"  save_dir: {tmp_path}/cv/lr${{learning_rate}}/${{fold}} }}\n")
    assert run_chain(["x-train", str(loop)]) == 0
    capsys.readouterr()
    assert x_script(["aggregate_results", str(tmp_path / "cv"), "--folds"]) == 0
    lines = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert lines[0] == ["runs", "metric", "folds", "best_mean", "best_std", "best_min", "best_max", "learning_rate"]
    assert len(lines) == 3
    for row in lines[1:]:
        lr = row[7]
        bests = [max(float(r["accuracy"]) for r in read_rows(tmp_path / "cv" / f"lr{lr}" / fold / "valid.log.tsv"))
                 for fold in ("dev", "test")]
        assert row[0] == f"{tmp_path}/cv/lr{lr}/{{dev,test}}" and row[1:3] == ["accuracy", "2"]
        assert float(row[3]) == pytest.approx(statistics.fmean(bests), rel=1e-5)
        assert float(row[4]) == pytest.approx(statistics.stdev(bests), rel=1e-5, abs=1e-9)
        assert [float(row[5]), float(row[6])] == pytest.approx(sorted(bests), rel=1e-5)
    assert x_script(["aggregate_results", str(tmp_path / "cv"), "--folds", "--full"]) == 2
