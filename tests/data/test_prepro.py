"""x-prepro end to end: real samples, determinism across workers, bad lines, reruns, failures, --dry."""

from __future__ import annotations

import hjson
import numpy as np
import pytest
from data_helpers import CHINESE_VOCAB, SAMPLES, prepro, split_bytes, write_lines

from xdpx.cli import EXIT_CONFIG, EXIT_FAILED
from xdpx.data.dataset import open_split
from xdpx.scripts.show_data import format_samples


def meta_of(data_dir):
    return hjson.loads((data_dir / "meta.hjson").read_text())


def test_reviews_char_zh_end_to_end(tmp_path, capsys):
    out = tmp_path / "out"
    assert prepro(tmp_path, data_source=str(SAMPLES / "reviews"), data_dir=str(out), processor="single",
                  loader="single", tokenizer="char_zh", max_len=64) == 0
    meta = meta_of(out)
    assert meta["data_size"] == {"dev": 60, "test": 60, "train": 240} and meta["num_classes"] == 2
    assert (out / "target_map.txt").read_text().split() in (["neg", "pos"], ["pos", "neg"])
    assert meta["vocab_size"] == len((out / "vocab.txt").read_text().splitlines()) and meta["pad_index"] == 0
    assert (out / "train.tokens.bin").stat().st_size == open_split(str(out), "train").sizes.sum() * 2  # uint16
    ds = open_split(str(out), "train")
    assert ds.sizes.max() <= 64 and ds[0]["target"] in (0, 1)
    log = (out / "log.txt").read_text()
    assert "train: 240 samples from 240 lines" in log and "truncated to max_len" in log
    assert "args.py" in {p.name for p in out.iterdir()}
    first_text = (SAMPLES / "reviews" / "train.txt").read_text().splitlines()[0].split("\t")[0]
    shown = format_samples(str(out), "train", 1)[1]
    assert shown.startswith("[0] " + " ".join(first_text.lower()[:3]))
    assert "[0]" in capsys.readouterr().out  # the sanity print at the end


def test_stsb_pairs_as_regression(tmp_path):
    out = tmp_path / "out"
    assert prepro(tmp_path, data_source=str(SAMPLES / "stsb"), data_files={"train.tsv": "train", "dev.tsv": "dev"},
                  data_dir=str(out), processor="bert_pair", loader="pair", text1_column=5, text2_column=6,
                  label_column=4, target_type="regression", tokenizer="bert", vocab_file=str(CHINESE_VOCAB),
                  max_len=64) == 0
    meta = meta_of(out)
    assert meta["num_classes"] == 1 and not (out / "target_map.txt").exists()
    first = (SAMPLES / "stsb" / "train.tsv").read_text().splitlines()[0].split("\t")
    ds = open_split(str(out), "train")
    assert ds[0]["target"] == pytest.approx(float(first[4]))
    assert (out / "train.target.npy").exists() and np.load(out / "train.target.npy").dtype == np.float32
    assert ds[0]["token_type_ids"].max() == 1


def test_peoples_daily_mlm_blocks(tmp_path):
    out = tmp_path / "out"
    assert prepro(tmp_path, data_source=str(SAMPLES / "peoples_daily"), data_dir=str(out), processor="bert_lm",
                  loader="corpus", parser="lines", tokenizer="bert", vocab_file=str(CHINESE_VOCAB), max_len=64,
                  break_mode="complete") == 0
    ds = open_split(str(out), "train")
    meta = meta_of(out)
    assert ds.sizes.max() <= 64 and ds.sizes.mean() > 40  # blocks are filled with whole lines
    assert all(ds[i]["input_ids"][0] == meta["cls_index"] for i in range(len(ds)))
    assert meta["mask_index"] == 103 and "target.npy" not in {p.name[6:] for p in out.iterdir()}


def test_english_polarity_label_first(tmp_path):
    out = tmp_path / "out"
    assert prepro(tmp_path, data_source=str(SAMPLES / "polarity"), data_dir=str(out), processor="single",
                  loader="single", text_column=1, label_column=0, tokenizer="space", max_len=64, threshold=0) == 0
    assert sorted((out / "target_map.txt").read_text().split()) == ["-1", "1"]
    assert meta_of(out)["data_size"]["train"] == 240


def test_workers_1_and_4_write_identical_bytes(tmp_path):
    outputs = {}
    for workers in (1, 4):
        out = tmp_path / f"out{workers}"
        assert prepro(tmp_path, data_source=str(SAMPLES / "reviews"), data_dir=str(out), processor="single",
                      loader="single", tokenizer="char_zh", max_len=64, workers=workers) == 0
        outputs[workers] = split_bytes(out)
    assert len(outputs[1]) == 14 and outputs[1] == outputs[4]
    assert meta_of(tmp_path / "out1")["fingerprint"] == meta_of(tmp_path / "out4")["fingerprint"]


BASIC = dict(processor="single", loader="single", tokenizer="space", max_len=16)


def test_bad_lines_stop_with_file_line_and_excerpt(tmp_path, source, capsys):
    write_lines(source / "train.txt", ["good one\tpos", "no label here", "bad two\tneg"])
    assert prepro(tmp_path, data_source=str(source), data_dir=str(tmp_path / "out"), **BASIC) == EXIT_FAILED
    err = capsys.readouterr().err
    assert "train.txt:2: expected at least 2 columns" in err and "'no label here'" in err
    assert not (tmp_path / "out").exists()


def test_invalid_utf8_and_unknown_label_are_bad_lines(tmp_path, source, capsys):
    (source / "train.txt").write_bytes(b"fine\tpos\nbro\xffken\tneg\n")
    assert prepro(tmp_path, data_source=str(source), data_dir=str(tmp_path / "o1"), **BASIC) == EXIT_FAILED
    assert "train.txt:2: bytes that are not UTF-8" in capsys.readouterr().err
    write_lines(source / "train.txt", ["fine\tpos", "odd\tmaybe"])
    (tmp_path / "map.txt").write_text("pos\nneg\n")
    assert prepro(tmp_path, data_source=str(source), data_dir=str(tmp_path / "o2"),
                  target_map_file=str(tmp_path / "map.txt"), **BASIC) == EXIT_FAILED
    assert "train.txt:2: label 'maybe' is not in the target map" in capsys.readouterr().err


def test_skip_bad_lines_counts_them(tmp_path, source, capsys):
    write_lines(source / "train.txt", ["good one\tpos", "no label", "\tneg", "bad two\tneg"])
    out = tmp_path / "out"
    assert prepro(tmp_path, data_source=str(source), data_dir=str(out), skip_bad_lines=True, max_bad_fraction=0.5,
                  **BASIC) == 0
    assert meta_of(out)["data_size"] == {"train": 2}
    assert "skipped 2 bad" in (out / "log.txt").read_text() and "skipped 2 bad" in capsys.readouterr().out


def test_rerun_adds_a_split_and_keeps_the_others(tmp_path, source):
    write_lines(source / "train.txt", ["a b\tpos", "c d\tneg"])
    write_lines(source / "extra.txt", ["a z\tneg"])
    out = tmp_path / "out"
    assert prepro(tmp_path, data_source=str(source), data_files="train.txt", data_dir=str(out), **BASIC) == 0
    train_bytes = (out / "train.tokens.bin").read_bytes()
    assert prepro(tmp_path, data_source=str(source), data_files=["extra.txt"], data_dir=str(out), **BASIC) == 0
    assert meta_of(out)["data_size"] == {"train": 2, "extra": 1}
    assert (out / "train.tokens.bin").read_bytes() == train_bytes
    assert open_split(str(out), "extra")[0]["tokens"][1] == 1  # 'z' is unknown: the vocabulary was kept


def test_rerun_with_another_processor_is_an_error_before_work(tmp_path, source, capsys):
    write_lines(source / "train.txt", ["a b\tpos"])
    out = tmp_path / "out"
    assert prepro(tmp_path, data_source=str(source), data_dir=str(out), **BASIC) == 0
    before = split_bytes(out)
    options = {**BASIC, "tokenizer": "char_zh"}
    assert prepro(tmp_path, data_source=str(source), data_dir=str(out), **options) == EXIT_FAILED
    assert "made with tokenizer: 'space'" in capsys.readouterr().err
    assert split_bytes(out) == before


def test_failed_run_leaves_data_dir_intact(tmp_path, source):
    write_lines(source / "train.txt", ["a b\tpos", "c d\tneg"])
    out = tmp_path / "out"
    assert prepro(tmp_path, data_source=str(source), data_dir=str(out), **BASIC) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    write_lines(source / "train.txt", ["a b c\tpos", "broken"])
    assert prepro(tmp_path, data_source=str(source), data_dir=str(out), **BASIC) == EXIT_FAILED
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert not [p for p in tmp_path.iterdir() if "staging" in p.name]


def test_shards_become_splits_and_meta_lists_each(tmp_path, source):
    for k in range(3):
        write_lines(source / f"train{k}.txt", [f"w{k} x\tpos", f"v{k}\tneg"])
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\nx\n")
    out = tmp_path / "out"
    assert prepro(tmp_path, data_source=str(source), data_dir=str(out), vocab_file=str(tmp_path / "vocab.txt"),
                  **BASIC) == 0
    assert meta_of(out)["data_size"] == {"train0": 2, "train1": 2, "train2": 2}


def test_dry_validates_paths_and_does_nothing(tmp_path, source, capsys):
    write_lines(source / "train.txt", ["a\tpos"])
    out = tmp_path / "out"
    assert prepro(tmp_path, dry=True, data_source=str(source), data_dir=str(out), **BASIC) == 0
    assert "# split train:" in capsys.readouterr().out and not out.exists()
    assert prepro(tmp_path, dry=True, data_source=str(source), data_files=["train.txt", "dev.txt"],
                  data_dir=str(out), **BASIC) == EXIT_CONFIG
    assert "prepro.hjson: data_files: nothing matches 'dev.txt'" in capsys.readouterr().err
    assert prepro(tmp_path, dry=True, data_source=str(tmp_path / "nowhere"), data_dir=str(out), **BASIC) == EXIT_CONFIG
    assert "does not exist" in capsys.readouterr().err
    assert prepro(tmp_path, dry=True, data_source=str(source), data_dir=str(out), processor="bert_lm",
                  loader="single", tokenizer="space", max_len=8) == EXIT_CONFIG
    assert "loader 'corpus' goes with processor 'bert_lm'" in capsys.readouterr().err


def test_jsonl_input_and_unlabelled_prediction_file(tmp_path, source):
    (source / "train.jsonl").write_text('{"text": "a b", "label": "x"}\n{"text": "b", "label": "y"}\n')
    (source / "test.jsonl").write_text('{"text": "a"}\n')
    out = tmp_path / "out"
    assert prepro(tmp_path, data_source=str(source), data_files="*.jsonl", data_dir=str(out), parser="jsonl",
                  fields=["text", "label"], **BASIC) == 0
    assert "target" in open_split(str(out), "train")[0] and "target" not in open_split(str(out), "test")[0]


def test_importing_xdpx_data_imports_no_torch_or_tokenizers():
    import subprocess
    import sys

    code = ("import sys, xdpx.data, xdpx.data.prepro, xdpx.data.meta, xdpx.data.dataset;"
            "print([m for m in ('torch', 'tokenizers') if m in sys.modules])")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "[]"
