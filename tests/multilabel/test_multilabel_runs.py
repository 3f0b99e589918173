"""Multi-label end to end on the committed People's Daily sample: x-prepro (separator and JSON lists
agree; bad input names file:line), x-train's valid.log.tsv == x-eval, x-pred's label sets and
probabilities (TSV and numpy), x-script best_threshold against a brute-force search, x-serve, and a
kill -9 in the middle of training resumed bitwise."""

from __future__ import annotations

import csv
import json
import signal
import sys
from pathlib import Path

import numpy as np
import pytest
from ml_helpers import REPO, SAMPLE, prepro, run_killable, train_config

from tests.train.train_helpers import assert_same_weights, final_weights
from xdpx.cli import run_chain, x_script
from xdpx.scripts.best_threshold import f_beta

LABELS = ["place", "time", "person", "organisation", "other_name"]  # by frequency in the sample's train


def read_tsv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def test_separator_and_json_lists_give_the_same_multi_hot_targets(multilabel_data, tmp_path):
    assert (multilabel_data / "target_map.txt").read_text().split() == LABELS
    targets = np.load(multilabel_data / "train.target.npy")
    assert targets.shape == (240, 5) and targets.dtype == np.uint8
    lines = (SAMPLE / "train.txt").read_text(encoding="utf-8").splitlines()
    for row, line in zip(targets, lines):
        names = [n for n in line.split("\t")[1].split("|") if n]
        assert [LABELS[k] for k in np.flatnonzero(row)] == sorted(names, key=LABELS.index)
    assert not targets[0].any()  # "走必由之路": an empty label column is the empty set
    from_json = prepro(tmp_path, parser="jsonl", fields=["text", "labels"], data_files="*.jsonl")
    assert (from_json / "target_map.txt").read_text() == (multilabel_data / "target_map.txt").read_text()
    for split in ("train", "dev", "test"):
        assert np.array_equal(np.load(from_json / f"{split}.target.npy"), np.load(multilabel_data / f"{split}.target.npy"))


@pytest.mark.parametrize("line,parser,message", [
    ('{"text": "北京", "labels": ["place", 3]}', "jsonl", "nested JSON values cannot be text or labels"),
    ("北京\tplace|nowhere", "tsv", "label 'nowhere' is not in the target map"),
], ids=["json-list-of-non-strings", "label-not-in-train"])
def test_bad_input_names_file_and_line(tmp_path, capsys, line, parser, message):
    source = tmp_path / "source"
    source.mkdir()
    suffix = "jsonl" if parser == "jsonl" else "txt"
    train = (SAMPLE / f"train.{suffix}").read_text(encoding="utf-8")
    (source / f"train.{suffix}").write_text(train, encoding="utf-8")
    (source / f"dev.{suffix}").write_text(train.splitlines(keepends=True)[0] + line + "\n", encoding="utf-8")
    config = {"data_source": str(source), "data_files": f"*.{suffix}", "parser": parser}
    if parser == "jsonl":
        config["fields"] = ["text", "labels"]
    with pytest.raises(BaseException):  # noqa: B017 (the run stops: the error text is what is checked)
        prepro(tmp_path, **config)
    err = capsys.readouterr()
    assert f"dev.{suffix}:2" in err.err + err.out and message in err.err + err.out


def test_a_json_list_label_needs_target_type_multilabel(tmp_path, capsys):
    config = {"data_source": str(SAMPLE), "data_files": "*.jsonl", "data_dir": str(tmp_path / "data"),
              "parser": "jsonl", "fields": ["text", "labels"], "loader": "single", "processor": "single",
              "tokenizer": "char_zh", "max_len": 50, "workers": 1}
    (tmp_path / "prepro.json").write_text(json.dumps(config))
    assert run_chain(["x-prepro", str(tmp_path / "prepro.json")]) != 0
    assert "train.jsonl:1: field 'labels' (the label) is a JSON list: set target_type: multilabel" in \
        capsys.readouterr().err


def test_eval_equals_the_best_row_of_valid_log(multilabel_run, tmp_path):
    rows = read_tsv(multilabel_run / "valid.log.tsv")
    best = next(r for r in rows if r["step"] == rows[-1]["best_step"])
    out = tmp_path / "scores.tsv"
    config = {"save_dir": str(multilabel_run), "valid_subset": ["dev", str(SAMPLE / "dev.txt")], "save_to_file": str(out)}
    (tmp_path / "eval.json").write_text(json.dumps(config))
    assert run_chain(["x-eval", str(tmp_path / "eval.json")]) == 0
    split, raw = read_tsv(out)
    columns = ["loss", "micro_f1", "macro_f1", "samples_f1", "subset_accuracy", "hamming_loss",
               *(f"f1_{label}" for label in LABELS)]
    assert [split[c] for c in columns] == [best[c] for c in columns] == [raw[c] for c in columns]
    assert 0 < float(best["micro_f1"]) < 1


def test_pred_writes_label_sets_and_probabilities(multilabel_run, tmp_path):
    tsv, npz = tmp_path / "dev.pred.tsv", tmp_path / "dev.npz"
    for name, out, binary in (("tsv", tsv, False), ("npz", npz, True)):
        config = {"save_dir": str(multilabel_run), "predict_file_map": {str(SAMPLE / "dev.txt"): str(out)},
                  "binary": binary}
        (tmp_path / f"{name}.json").write_text(json.dumps(config))
        assert run_chain(["x-pred", str(tmp_path / f"{name}.json")]) == 0
    rows = read_tsv(tsv)
    assert list(rows[0]) == ["text", "label", "predict", *(f"prob_{label}" for label in LABELS)]
    arrays = np.load(npz)
    assert list(arrays["labels"]) == LABELS and arrays["probabilities"].shape == (60, 5)
    thresholds = np.array([0.3 if label == "person" else 0.4 for label in LABELS])  # the run's thresholds
    assert np.array_equal(arrays["thresholds"], thresholds.astype(np.float32))
    assert np.array_equal(arrays["predictions"], arrays["probabilities"] >= thresholds.astype(np.float32))
    for row, probabilities, chosen in zip(rows, arrays["probabilities"], arrays["predictions"]):
        assert [float(row[f"prob_{label}"]) for label in LABELS] == pytest.approx(probabilities.tolist(), abs=1e-6)
        assert row["predict"] == "|".join(label for label, on in zip(LABELS, chosen) if on)
    assert any(r["predict"] for r in rows) and any("|" in r["predict"] for r in rows)


def brute_force(probabilities: list[float], positive: list[bool]) -> float:
    best = 0.0
    for threshold in sorted(set(probabilities)) + [2.0]:
        tp = sum(p >= threshold and y for p, y in zip(probabilities, positive))
        fp = sum(p >= threshold and not y for p, y in zip(probabilities, positive))
        best = max(best, f_beta(tp, fp, sum(positive) - tp, 1.0))
    return best


def test_best_threshold_per_label_and_global_match_a_brute_force_search(multilabel_run, tmp_path, capsys):
    out = tmp_path / "dev.pred.tsv"
    (tmp_path / "pred.json").write_text(json.dumps({"save_dir": str(multilabel_run),
                                                    "predict_file_map": {str(SAMPLE / "dev.txt"): str(out)}}))
    assert run_chain(["x-pred", str(tmp_path / "pred.json")]) == 0
    capsys.readouterr()
    assert x_script(["best_threshold", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = {line.split("\t")[0]: line.split("\t") for line in lines[1:] if not line.startswith("#")}
    rows = read_tsv(out)
    truth = [set(r["label"].split("|")) - {""} for r in rows]
    pooled_p, pooled_y = [], []
    for label in LABELS:
        probabilities = [float(r[f"prob_{label}"]) for r in rows]
        positive = [label in t for t in truth]
        pooled_p += probabilities
        pooled_y += positive
        if any(positive):
            assert float(table[label][2]) == pytest.approx(brute_force(probabilities, positive), abs=1e-6)
            threshold = float(table[label][1])  # the printed cut gives the printed F1
            tp = sum(p >= threshold and y for p, y in zip(probabilities, positive))
            fp = sum(p >= threshold and not y for p, y in zip(probabilities, positive))
            assert f_beta(tp, fp, sum(positive) - tp, 1.0) == pytest.approx(float(table[label][2]), abs=1e-6)
    assert float(table["*"][2]) == pytest.approx(brute_force(pooled_p, pooled_y), abs=1e-6)
    assert lines[-2].startswith("# label_thresholds: {") and lines[-1].startswith("# decision_threshold: ")
    # bce_threshold is the same tool
    assert x_script(["bce_threshold", str(out)]) == 0
    assert capsys.readouterr().out.splitlines() == lines


def test_serve_answers_label_sets(multilabel_run):
    sys.path.insert(0, str(REPO / "tests/inference"))
    from serve_helpers import request, running_server

    lines = (SAMPLE / "dev.txt").read_text(encoding="utf-8").splitlines()[:5]
    with running_server(multilabel_run) as server:
        texts = [line.split("\t")[0] for line in lines]
        status, answers, _ = request(server.address, "POST", "/predict", json.dumps(texts).encode())
        assert status == 200, answers
        status_embed = request(server.address, "POST", "/embed", b'["x"]')[0]
    assert status_embed == 404
    for answer in answers:
        assert list(answer["probabilities"]) == LABELS
        expected = [label for label in LABELS
                    if answer["probabilities"][label] >= (0.3 if label == "person" else 0.4)]
        assert answer["labels"] == expected


def test_kill_during_training_then_resume_is_bitwise(multilabel_data, multilabel_run, tmp_path):
    config = train_config(tmp_path, multilabel_data)
    assert run_killable(config, "update", 17) == -signal.SIGKILL
    assert run_killable(config) == 0
    assert_same_weights(final_weights(tmp_path / "run"), final_weights(multilabel_run))
    assert (tmp_path / "run/valid.log.tsv").read_text() == (multilabel_run / "valid.log.tsv").read_text()
