"""x-pred: output read back with pandas (quotes, tabs, line breaks), options, batch sizes, bad input."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from inference_helpers import SAMPLE, write_json

from xdpx.cli import run_chain
from xdpx.io.tsv_cells import escape, unescape

pd = pytest.importorskip("pandas")

TEST_TXT = SAMPLE / "reviews/test.txt"


def x_pred(tmp_path: Path, **config: object) -> int:
    return run_chain(["x-pred", str(write_json(tmp_path / "pred.hjson", config))])


def read_pred(path: Path, header: bool = True) -> pd.DataFrame:
    # exactly as the original XDPX's manual shows it; keep_default_na off so a text such as "NA" stays text
    return pd.read_csv(path, sep="\t", header=0 if header else None, quoting=csv.QUOTE_NONE, keep_default_na=False)


def sample_lines(n: int | None = None) -> list[tuple[str, str]]:
    rows = [line.split("\t") for line in TEST_TXT.read_text(encoding="utf-8").splitlines()]
    return [(text, label) for text, label in rows][:n]


def test_escape_round_trip() -> None:
    for text in ['say "hi"', "a\tb", "two\nlines\r\n", "back\\slash \\t literal", "", "普通文本"]:
        assert unescape(escape(text)) == text
        assert "\t" not in escape(text) and "\n" not in escape(text)


def test_output_round_trips_through_pandas_with_quotes_and_tabs(cnn_run: Path, tmp_path: Path) -> None:
    """Texts with quotes, tabs, line breaks and backslashes (a Parquet table can hold them all)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = sample_lines(20)
    tricky = ['他说"很好"，还"不错', "质量\t很好\t推荐", "第一行\n第二行", 'C:\\new "quoted\ttab"', "'单引号' \"\""]
    texts = tricky + [t for t, _ in rows]
    labels = ["pos", "neg", "pos", "neg", "pos"] + [label for _, label in rows]
    table = tmp_path / "tricky.parquet"
    pq.write_table(pa.table({"review": texts, "sentiment": labels}), table)
    quoted = tmp_path / "quoted.txt"  # the training format (tab-separated, no quoting): quotes are text
    quoted.write_text("".join(f"{t}\t{label}\n" for t, label in zip(tricky, labels) if "\t" not in t and "\n" not in t),
                      encoding="utf-8")
    out_table, out_text = tmp_path / "tricky.tsv", tmp_path / "quoted.tsv"
    assert x_pred(tmp_path, save_dir=str(cnn_run),
                  predict_file_map={str(table): str(out_table), str(quoted): str(out_text)}) == 0

    frame = read_pred(out_table)
    assert list(frame.columns) == ["review", "sentiment", "predict", "prob", "prob_neg", "prob_pos"]
    assert len(frame) == len(texts)
    assert [unescape(t) for t in frame["review"]] == texts
    assert list(frame["sentiment"]) == labels
    probs = frame[["prob_neg", "prob_pos"]].to_numpy()
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-6)
    assert list(frame["predict"]) == [["neg", "pos"][k] for k in probs.argmax(axis=1)]
    np.testing.assert_allclose(frame["prob"], probs.max(axis=1), atol=1e-7)

    quoted_frame = read_pred(out_text)
    assert list(quoted_frame.columns) == ["text", "label", "predict", "prob", "prob_neg", "prob_pos"]
    expected_texts = [t for t in tricky if "\t" not in t and "\n" not in t]
    assert [unescape(t) for t in quoted_frame["text"]] == expected_texts
    # the same text predicts the same from a table and from a text file
    same = frame.set_index(frame["review"])
    for _, row in quoted_frame.iterrows():
        assert same.loc[row["text"], "prob_pos"] == row["prob_pos"]


def test_batch_size_1_and_256_predict_the_same(cnn_run: Path, tmp_path: Path) -> None:
    outputs = {}
    for batch_size in (1, 256):
        out = tmp_path / f"b{batch_size}.tsv"
        assert x_pred(tmp_path, save_dir=str(cnn_run), batch_size=batch_size, binary=True,
                      predict_file_map={str(TEST_TXT): str(out)}) == 0
        with open(out, "rb") as f:
            outputs[batch_size] = dict(np.load(f, allow_pickle=False))
    one, many = outputs[1], outputs[256]
    np.testing.assert_array_equal(one["record"], np.arange(1, 61))
    np.testing.assert_allclose(one["probabilities"], many["probabilities"], atol=1e-5, rtol=0)
    np.testing.assert_array_equal(one["predictions"], many["predictions"])
    assert list(one["labels"]) == ["neg", "pos"]


def test_unlabelled_input_header_concat_origin_max_predict(cnn_run: Path, tmp_path: Path) -> None:
    unlabelled = tmp_path / "new.txt"
    unlabelled.write_text("".join(f"{t}\n" for t, _ in sample_lines(30)), encoding="utf-8")
    full, short, bare = tmp_path / "full.tsv", tmp_path / "short.tsv", tmp_path / "bare.tsv"
    assert x_pred(tmp_path, save_dir=str(cnn_run), predict_file_map={str(unlabelled): str(full)}) == 0
    frame = read_pred(full)
    assert list(frame.columns) == ["text", "predict", "prob", "prob_neg", "prob_pos"] and len(frame) == 30
    assert x_pred(tmp_path, save_dir=str(cnn_run), max_predict=7, header=False, concat_origin=False,
                  predict_file_map={str(unlabelled): str(short)}) == 0
    lines = short.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 7 and all(len(line.split("\t")) == 4 for line in lines)
    full_lines = full.read_text(encoding="utf-8").splitlines()
    assert lines == ["\t".join(line.split("\t")[1:]) for line in full_lines[1:8]]
    # labelled input without the original columns: predictions only
    assert x_pred(tmp_path, save_dir=str(cnn_run), concat_origin=False,
                  predict_file_map={str(TEST_TXT): str(bare)}) == 0
    assert list(read_pred(bare).columns) == ["predict", "prob", "prob_neg", "prob_pos"]


def test_distill_writes_logits(cnn_run: Path, tmp_path: Path) -> None:
    logits_tsv, probs_tsv, logits_npz = tmp_path / "logits.tsv", tmp_path / "probs.tsv", tmp_path / "logits.npz"
    assert x_pred(tmp_path, save_dir=str(cnn_run), distill=True, concat_origin=False,
                  predict_file_map={str(TEST_TXT): str(logits_tsv)}) == 0
    assert x_pred(tmp_path, save_dir=str(cnn_run), predict_file_map={str(TEST_TXT): str(probs_tsv)}) == 0
    assert x_pred(tmp_path, save_dir=str(cnn_run), distill=True, binary=True,
                  predict_file_map={str(TEST_TXT): str(logits_npz)}) == 0
    logits = read_pred(logits_tsv)
    assert list(logits.columns) == ["logit_neg", "logit_pos"]
    values = logits.to_numpy()
    softmax = np.exp(values - values.max(axis=1, keepdims=True))
    softmax /= softmax.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(softmax, read_pred(probs_tsv)[["prob_neg", "prob_pos"]].to_numpy(), atol=1e-6)
    with open(logits_npz, "rb") as f:
        arrays = np.load(f, allow_pickle=False)
        np.testing.assert_allclose(arrays["logits"], values, atol=1e-6)


def test_split_names_and_bad_lines(cnn_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    split_out = tmp_path / "dev.tsv"
    assert x_pred(tmp_path, save_dir=str(cnn_run), predict_file_map={"dev": str(split_out)}) == 0
    frame = read_pred(split_out)
    assert list(frame.columns)[:2] == ["text", "label"] and len(frame) == 60
    bad = tmp_path / "bad.txt"
    bad.write_text("好\tpos\n\tpos\n不好\tneg\n", encoding="utf-8")
    out = tmp_path / "bad.tsv"
    assert x_pred(tmp_path, save_dir=str(cnn_run), predict_file_map={str(bad): str(out)}) == 1
    assert f"{bad}:2: empty text" in capsys.readouterr().err
    assert not out.exists()  # nothing half-written
    assert x_pred(tmp_path, save_dir=str(cnn_run), skip_bad_lines=True, max_bad_fraction=0.5,
                  predict_file_map={str(bad): str(out)}) == 0
    assert list(read_pred(out)["text"]) == ["好", "不好"]
    assert "skipped 1 bad line" in capsys.readouterr().out
