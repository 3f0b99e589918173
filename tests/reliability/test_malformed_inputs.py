"""The malformed-input corpus (malformed_helpers.py) through x-prepro and x-pred: each kind gives
``file:line: reason`` (exit 1, nothing written), a counted skip under skip_bad_lines, or, for inputs that
are valid after all, exactly the clean data. Never exit 0 with wrong data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import hjson
import pytest
from malformed_helpers import (
    PREPRO_BASE,
    Kind,
    clean_rows,
    prepro_kinds,
    run,
    tsv,
    with_line,
    write_files,
    write_json,
)

from xdpx.cli import EXIT_FAILED
from xdpx.data.dataset import open_split

KINDS = prepro_kinds()


def prepro(tmp_path: Path, kind: Kind, capsys: Any, **extra: Any) -> tuple[int, str, str, Path]:
    source = write_files(tmp_path / "source", kind.files)
    data_dir = tmp_path / "data"
    config = write_json(tmp_path / "prepro.hjson", {**PREPRO_BASE, "data_source": str(source),
                                                    "data_dir": str(data_dir), **kind.options, **extra})
    code, out, err = run("x-prepro", config, capsys)
    return code, out, err, data_dir


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_x_prepro_names_file_and_line_or_gives_the_clean_data(tmp_path: Path, kind: Kind, capsys: Any) -> None:
    code, out, err, data_dir = prepro(tmp_path, kind, capsys)
    if kind.outcome == "ok":
        assert code == 0, err
        meta = hjson.loads((data_dir / "meta.hjson").read_text())
        assert meta["data_size"]["train"] == kind.samples
        assert (data_dir / "target_map.txt").read_text().split() in (["neg", "pos"], ["pos", "neg"])
        train = open_split(str(data_dir), "train")
        vocab = (data_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
        first_text = clean_rows()[0][0]
        assert " ".join(vocab[i] for i in train[0]["tokens"]) == first_text  # no BOM or \r in a token
        assert not any("\r" in w or "\ufeff" in w for w in vocab)
        assert train.sizes.max() <= PREPRO_BASE["max_len"]
        return
    assert code == EXIT_FAILED, (out, err)
    assert str(tmp_path / "source" / kind.where) in err and kind.message in err, err
    assert "Traceback" not in err
    assert not data_dir.exists()  # nothing written


SKIPPABLE = [k for k in KINDS if k.outcome == "error"]


@pytest.mark.parametrize("kind", SKIPPABLE, ids=[k.name for k in SKIPPABLE])
def test_x_prepro_skip_bad_lines_counts_them_or_refuses(tmp_path: Path, kind: Kind, capsys: Any) -> None:
    code, out, err, data_dir = prepro(tmp_path, kind, capsys, skip_bad_lines=True)
    if kind.skipped is None:  # too much of the input is bad (or the whole file is): skipping cannot help
        assert code == EXIT_FAILED and "Traceback" not in err and str(tmp_path / "source") in err, (out, err)
        assert not data_dir.exists()
        return
    assert code == 0, err
    log = (data_dir / "log.txt").read_text(encoding="utf-8")
    split = kind.where.split(".")[0]
    assert f"warning: {split}: skipped {kind.skipped} bad line(s)" in log and kind.message in log
    meta = hjson.loads((data_dir / "meta.hjson").read_text())
    assert meta["data_size"][split] == (40 if split == "train" else 30)  # exactly the clean lines
    if "target_type" not in kind.options:
        assert sorted((data_dir / "target_map.txt").read_text().split()) == ["neg", "pos"]


def test_skip_bound_refuses_a_binary_file_and_names_the_bound(tmp_path: Path, capsys: Any) -> None:
    kind = next(k for k in KINDS if k.name == "binary garbage")
    code, _, err, data_dir = prepro(tmp_path, kind, capsys, skip_bad_lines=True)
    assert code == EXIT_FAILED and "96 of 96 lines (100.0%) are bad, more than max_bad_fraction 0.05" in err
    assert not data_dir.exists()


def test_skip_bound_is_an_option(tmp_path: Path, capsys: Any) -> None:
    damaged = tsv(clean_rows()) + b"no label\n" * 10  # 10 of 50 lines bad: 20%
    kind = Kind("a fifth bad", {"train.txt": damaged}, "error")
    code, _, err, data_dir = prepro(tmp_path, kind, capsys, skip_bad_lines=True)
    assert code == EXIT_FAILED and "10 of 50 lines (20.0%) are bad" in err and not data_dir.exists()
    code, _, err, data_dir = prepro(tmp_path, kind, capsys, skip_bad_lines=True, max_bad_fraction=0.25)
    assert code == 0, err
    assert hjson.loads((data_dir / "meta.hjson").read_text())["data_size"] == {"train": 40}
    assert "warning: train: skipped 10 bad line(s) of 50 (20.00%" in (data_dir / "log.txt").read_text()


def test_extra_columns_true_reads_sts_b_style_optional_columns(tmp_path: Path, capsys: Any) -> None:
    rows = [("g", "f", "2016", str(i), "3.5", f"a {w}", f"b {w}") for i, (w, _) in enumerate(clean_rows(20))]
    rows[4] = rows[4] + ("source one", "source two")
    kind = Kind("sts", {"train.tsv": tsv(rows)}, "ok", options={
        "data_files": "*.tsv", "loader": "pair", "processor": "pair", "text1_column": 5, "text2_column": 6,
        "label_column": 4, "target_type": "regression"})
    code, _, err, _ = prepro(tmp_path, kind, capsys)
    assert code == EXIT_FAILED and "train.tsv:5: 9 columns, but the first record" in err
    code, _, err, data_dir = prepro(tmp_path, kind, capsys, extra_columns=True)
    assert code == 0, err
    assert open_split(str(data_dir), "train")[4]["target"] == pytest.approx(3.5)


def test_label_column_null_reads_labelled_files_as_unlabelled_texts(tmp_path: Path, capsys: Any) -> None:
    """docs/prepro.md offers `label_column: null` to ignore the other columns: it was refused as not an int."""
    kind = Kind("label_column null", {"train.txt": tsv(clean_rows())}, "ok", options={"label_column": None})
    code, _, err, data_dir = prepro(tmp_path, kind, capsys)
    assert code == 0, err
    meta = hjson.loads((data_dir / "meta.hjson").read_text())
    assert meta["label_column"] is None and meta["data_size"] == {"train": 40}
    assert not (data_dir / "target_map.txt").exists()
    vocab = (data_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    train = open_split(str(data_dir), "train")
    assert " ".join(vocab[i] for i in train[0]["tokens"]) == clean_rows()[0][0] and "target" not in train[0]
    assert "pos" not in vocab and "neg" not in vocab  # the label column is not read as text


def test_a_label_spelt_with_other_inner_whitespace_stops_x_prepro_unless_variants_are_allowed(
        tmp_path: Path, capsys: Any) -> None:
    rows = [(text, "very nice" if i % 2 else "not nice") for i, (text, _) in enumerate(clean_rows())]
    kind = Kind("spacing", {"train.txt": with_line(tsv(rows), 7, b"a b\tVery  Nice")}, "error")
    code, _, err, data_dir = prepro(tmp_path, kind, capsys)
    assert code == EXIT_FAILED and not data_dir.exists(), err
    assert (f"{tmp_path / 'source' / 'train.txt'}:7: label 'Very  Nice' (1 train sample(s)) differs from 'very nice' "
            f"(20, first at {tmp_path / 'source' / 'train.txt'}:2) only by case or whitespace: it would be a class of "
            "its own. Write it 'very nice' in the data (or set allow_label_variants: true if they are different "
            "classes)") in err, err
    code, _, err, data_dir = prepro(tmp_path, kind, capsys, allow_label_variants=True)
    assert code == 0, err
    assert (data_dir / "target_map.txt").read_text().splitlines() == ["not nice", "very nice", "Very  Nice"]


def test_json_number_labels_beside_strings_are_one_class_and_x_prepro_says_so(tmp_path: Path, capsys: Any) -> None:
    rows = b"".join(b'{"text": "%s", "label": "%d"}\n' % (t.encode(), i % 2) for i, (t, _) in enumerate(clean_rows()))
    rows += b'{"text": "a b", "label": 1}\n{"text": "c d", "label": 1.0}\n{"text": "e f", "label": 0e0}\n'
    kind = Kind("json kinds", {"train.jsonl": rows}, "ok",
                options={"parser": "jsonl", "fields": ["text", "label"], "data_files": "*.jsonl"})
    code, out, err, data_dir = prepro(tmp_path, kind, capsys)
    assert code == 0, err
    assert (data_dir / "target_map.txt").read_text().splitlines() == ["1", "0"]  # 1.0 and 0e0 are 1 and 0
    where = tmp_path / "source" / "train.jsonl"
    assert (f"note: label '1' is written both as a JSON number ({where}:41) and as a string ({where}:2): one class, "
            "the label being its text") in out, out
    assert f"note: label '0' is written both as a JSON number ({where}:43) and as a string ({where}:1)" in out, out
    targets = [int(open_split(str(data_dir), "train")[i]["target"]) for i in (1, 40, 41, 42)]
    assert targets == [0, 0, 0, 1]  # "1", 1, 1.0 -> class of '1'; 0e0 -> class of '0'


# ---- x-pred ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two tiny trained runs on the clean rows: read as TSV and as jsonl."""
    from xdpx.cli import run_chain  # no capsys at module scope: the chain is run directly

    out = {}
    for name, files, options in (("tsv", {"train.txt": tsv(clean_rows())}, {}),
                                 ("jsonl", {"train.jsonl": b"".join(
                                     b'{"text": "%s", "label": "%s"}\n' % (t.encode(), y.encode())
                                     for t, y in clean_rows())},
                                  {"parser": "jsonl", "fields": ["text", "label"], "data_files": "*.jsonl"})):
        root = tmp_path_factory.mktemp(f"run_{name}")
        source = write_files(root / "source", files)
        prepro_config = write_json(root / "prepro.hjson", {**PREPRO_BASE, "data_source": str(source),
                                                           "data_dir": str(root / "data"), **options})
        train_config = write_json(root / "train.hjson", {
            "__parent__": "${data_dir}/meta", "data_dir": str(root / "data"), "save_dir": str(root / "run"),
            "model": "cls_cnn", "loss": "cross_entropy", "embedding_dim": 8, "num_filters": 4, "kernel_sizes": [2],
            "batch_size": 8, "learning_rate": 3e-3, "max_update": 3, "eval_interval": 3, "major_metric": "accuracy",
            "valid_subset": "train"})
        assert run_chain(["x-prepro", str(prepro_config), "x-train", str(train_config)]) == 0
        out[name] = root / "run"
    return out


def pred_input(kind: Kind) -> tuple[str, bytes]:
    """The kind's damaged file as an input of x-pred (dev.txt for the dev-only label)."""
    name = "dev.txt" if "dev.txt" in kind.files else next(iter(kind.files))
    return name, kind.files[name]


PRED_KINDS = [k for k in KINDS if "target_type" not in k.options and "min_len" not in k.options
              and k.options.get("parser") != "json"]


@pytest.mark.parametrize("kind", PRED_KINDS, ids=[k.name for k in PRED_KINDS])
def test_x_pred_names_file_and_line_or_counts_the_skip(runs: dict[str, Path], tmp_path: Path, kind: Kind,
                                                       capsys: Any) -> None:
    name, data = pred_input(kind)
    path = tmp_path / name
    path.write_bytes(data)
    out = tmp_path / "pred.tsv"
    run_dir = runs["jsonl" if name.endswith(".jsonl") else "tsv"]
    config = {"save_dir": str(run_dir), "predict_file_map": {str(path): str(out)}, "cuda": False}
    code, stdout, err = run("x-pred", write_json(tmp_path / "pred.hjson", config), capsys)
    if kind.outcome == "ok":
        assert code == 0, err
        with open(out, encoding="utf-8", newline="") as f:
            rows = [line.split("\t") for line in f.read().split("\n")[:-1]]
        assert len(rows) == 1 + kind.samples  # header + one prediction per record
        assert rows[1][0] == clean_rows()[0][0]  # no BOM, no \r in the echoed text
        return
    where = kind.where if kind.where.startswith(name) else name
    assert code == EXIT_FAILED and f"{path}" in err and "Traceback" not in err, err
    assert where in err and ((kind.pred_message or kind.message) in err or kind.skipped is None), err
    assert not out.exists()  # a cut-short output is never published

    config["skip_bad_lines"] = True
    code, stdout, err = run("x-pred", write_json(tmp_path / "pred.hjson", config), capsys)
    if kind.skipped is None:
        assert code == EXIT_FAILED and not out.exists(), (stdout, err)
        return
    assert code == 0, err
    assert f"skipped {kind.skipped} bad line(s)" in stdout
    with open(out, encoding="utf-8") as f:
        assert len(f.read().splitlines()) == 1 + len(data.strip().split(b"\n")) - kind.skipped


def test_a_first_line_singleton_label_in_tiny_data_is_not_taken_for_a_header(tmp_path: Path, capsys: Any) -> None:
    kind = Kind("tiny", {"train.txt": tsv([("a b", "pos"), ("c d", "neg"), ("e f", "neg")])}, "ok")
    code, _, err, data_dir = prepro(tmp_path, kind, capsys)
    assert code == 0, err
    assert (data_dir / "target_map.txt").read_text().split() == ["neg", "pos"]


def test_a_file_without_line_ends_stops_at_file_line_instead_of_filling_memory(tmp_path: Path, capsys: Any,
                                                                               monkeypatch: Any) -> None:
    from xdpx.data import reading

    monkeypatch.setattr(reading, "MAX_LINE_BYTES", 1 << 20)
    monkeypatch.setattr(reading, "BLOCK_BYTES", 1 << 16)
    kind = Kind("no line ends", {"train.txt": tsv(clean_rows(3)) + b"x" * (3 << 20)}, "error")
    code, _, err, data_dir = prepro(tmp_path, kind, capsys, skip_bad_lines=True)
    assert code == EXIT_FAILED and f"{tmp_path / 'source' / 'train.txt'}:4: a line longer than 1 MiB" in err, err
    assert not data_dir.exists()


# ---- vocabularies whose tokens hold line breaks ------------------------------------------------------

ODD_TOKENS = ["[PAD]", "[UNK]", "\n", "a\r\nb", "\r", "tab\there", "back\\slash", "x\\ny", "\u2028", "\x85", "good"]


def test_a_vocabulary_with_line_break_tokens_round_trips_and_old_files_load_unchanged(tmp_path: Path) -> None:
    from xdpx.data.dictionary import ESCAPED_MARK, Dictionary

    Dictionary(ODD_TOKENS).save(str(tmp_path / "vocab.txt"))
    lines = (tmp_path / "vocab.txt").read_text(encoding="utf-8").split("\n")
    assert lines[-2:] == [ESCAPED_MARK, ""] and len(lines) == len(ODD_TOKENS) + 2  # one line per token, the mark
    assert lines[:4] == ["[PAD]", "[UNK]", "\\n", "a\\r\\nb"] and lines[6:8] == ["back\\\\slash", "x\\\\ny"]
    assert Dictionary.load(str(tmp_path / "vocab.txt")).tokens == ODD_TOKENS
    # a file of an earlier release (no mark) is read as it is: a backslash stays a backslash
    old = ["[PAD]", "[UNK]", "\\", "x\\ny", "\\u2028", "##\\t", "good"]
    (tmp_path / "old.txt").write_text("".join(f"{t}\n" for t in old), encoding="utf-8")
    assert Dictionary.load(str(tmp_path / "old.txt")).tokens == old
    Dictionary(old).save(str(tmp_path / "plain.txt"))  # nothing to escape: written plain, as before
    assert (tmp_path / "plain.txt").read_text(encoding="utf-8") == (tmp_path / "old.txt").read_text(encoding="utf-8")


def test_x_prepro_keeps_a_tokenizer_vocabulary_with_a_newline_token_one_line_per_id(tmp_path: Path,
                                                                                     capsys: Any) -> None:
    """A tokenizer.json holding a "\\n" token made vocab.txt one line too long (vocab_size one too many)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    from xdpx.data.dictionary import Dictionary

    vocab = {token: i for i, token in enumerate(ODD_TOKENS)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    (tmp_path / "tok").mkdir()
    tokenizer.save(str(tmp_path / "tok" / "tokenizer.json"))
    kind = Kind("newline token", {"train.txt": tsv(clean_rows())}, "ok",
                options={"tokenizer": "auto", "tokenizer_dir": str(tmp_path / "tok")})
    code, _, err, data_dir = prepro(tmp_path, kind, capsys)
    assert code == 0, err
    assert hjson.loads((data_dir / "meta.hjson").read_text())["vocab_size"] == len(ODD_TOKENS)
    assert Dictionary.load(str(data_dir / "vocab.txt")).tokens == ODD_TOKENS
    train = open_split(str(data_dir), "train")
    ids = [list(train[i]["tokens"]) for i in range(len(clean_rows()))]
    assert ids == [[vocab.get(word, 1) for word in text.split()] for text, _ in clean_rows()]
    assert any(vocab["good"] in row for row in ids)  # ids past the newline token are the tokenizer's own
