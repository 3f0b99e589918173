"""loader corpus_mix: corpora mixed by ratios, counted per corpus in the written split; seeded and
reproducible; documents kept whole; the original XDPX's corpus_mix config (no ratios) still runs."""

from __future__ import annotations

from collections import Counter

import hjson
from data_helpers import CHINESE_VOCAB, prepro, split_bytes, write_lines

from xdpx.cli import EXIT_FAILED
from xdpx.data.dataset import open_split
from xdpx.data.dictionary import Dictionary

LM = dict(processor="bert_lm", loader="corpus_mix", parser="lines", tokenizer="bert", vocab_file=str(CHINESE_VOCAB),
          max_len=16, break_mode="eos")
MARKS = {"a": "甲", "b": "乙", "c": "丙"}  # each corpus's lines start with its own character


def write_corpora(source, sizes, lines_per_doc=1):
    for name, size in sizes.items():
        lines = []
        for doc in range(size):
            lines += [f"{MARKS[name] * 3}{doc}x{i}" for i in range(lines_per_doc)] + [""]
        write_lines(source / f"{name}.txt", lines)


def corpus_counts(data_dir, split="train"):
    """Samples per corpus, from the first token after [CLS] of each sample of the written split."""
    vocab = Dictionary.load(str(data_dir / "vocab.txt"), "[PAD]", "[UNK]")
    ids = {vocab.index[mark]: name for name, mark in MARKS.items()}
    ds = open_split(str(data_dir), split)
    return Counter(ids[int(ds[i]["input_ids"][1])] for i in range(len(ds)))


def test_counts_follow_the_ratios_without_repeating_a_unit(tmp_path, source):
    write_corpora(source, {"a": 200, "b": 100})
    write_lines(source / "dev.txt", ["甲乙 held out", "", "乙甲 too"])
    out = tmp_path / "out"
    assert prepro(tmp_path, data_source=str(source), data_files={"a.txt": "train", "b.txt": "train", "dev.txt": "dev"},
                  data_dir=str(out), mix_ratios={"a.txt": 1, "b.txt": 3}, **LM) == 0
    # b is the scarce corpus for its 75%: taken whole (100), a gives 25% of the 133 units: 33
    assert corpus_counts(out) == {"a": 33, "b": 100}
    assert hjson.loads((out / "meta.hjson").read_text())["data_size"] == {"train": 133, "dev": 2}  # dev unmixed
    log = (out / "log.txt").read_text()
    assert "mixed: a.txt: 33 documents of 200 (share 25.0%)" in log and "mixed: b.txt: 100 documents of 100" in log
    ds = open_split(str(out), "train")
    firsts = [ds[i]["input_ids"][1] for i in range(40)]
    assert len(set(firsts)) == 2  # interleaved, not one corpus after the other


def test_mix_size_upsamples_and_globs_pick_the_corpora(tmp_path, source):
    (source / "web").mkdir()
    write_corpora(source / "web", {"a": 30, "b": 20})
    write_corpora(source, {"c": 50})
    out = tmp_path / "out"
    assert prepro(tmp_path, data_source=str(source), data_files={"web/*.txt": "train", "c.txt": "train"},
                  data_dir=str(out), mix_ratios={"web/*.txt": 1, "c.txt": 2}, mix_size=200, **LM) == 0
    # web/*.txt is one corpus of 50 documents (a 30, b 20): a third of 200 is 67 (largest remainder), so it
    # is taken whole once and 17 more are sampled; c.txt gives 133 of its 50: twice whole and 33 sampled.
    counts = corpus_counts(out)
    assert counts["a"] + counts["b"] == 67 and counts["c"] == 133 and counts["a"] >= 30 and counts["b"] >= 20
    assert "mixed: web/*.txt: 67 documents of 50 (share 33.3%)" in (out / "log.txt").read_text()


def test_the_mix_is_seeded_and_reproducible(tmp_path, source):
    write_corpora(source, {"a": 120, "b": 80})
    runs = {}
    for name, seed in (("one", 7), ("again", 7), ("other", 8)):
        out = tmp_path / name
        assert prepro(tmp_path, name=name, data_source=str(source), data_files={"a.txt": "train", "b.txt": "train"},
                      data_dir=str(out), mix_ratios={"a.txt": 1, "b.txt": 1}, mix_seed=seed, workers=2 if name ==
                      "again" else 1, **LM) == 0
        runs[name] = split_bytes(out)
        assert corpus_counts(out) == {"a": 80, "b": 80}
    assert runs["one"] == runs["again"]
    assert runs["one"]["train.input_ids.bin"] != runs["other"]["train.input_ids.bin"]


def test_documents_stay_whole_and_corpora_never_join(tmp_path, source):
    write_corpora(source, {"a": 40, "b": 40}, lines_per_doc=3)
    out = tmp_path / "out"
    assert prepro(tmp_path, data_source=str(source), data_files={"a.txt": "train", "b.txt": "train"},
                  data_dir=str(out), mix_ratios={"a.txt": 1, "b.txt": 1}, **{**LM, "break_mode": "complete_doc",
                                                                            "max_len": 64}) == 0
    vocab = Dictionary.load(str(out / "vocab.txt"), "[PAD]", "[UNK]")
    marks = {vocab.index[m] for m in MARKS.values()}
    ds = open_split(str(out), "train")
    for i in range(len(ds)):
        seen = {int(t) for t in ds[i]["input_ids"]} & marks
        assert len(seen) == 1  # a block never holds two corpora (nor two documents: complete_doc)
    assert sum(corpus_counts(out).values()) == len(ds) == 80


def test_mix_errors_name_the_file(tmp_path, source, capsys):
    write_corpora(source, {"a": 5, "b": 5})
    assert prepro(tmp_path, data_source=str(source), data_files={"a.txt": "train", "b.txt": "train"},
                  data_dir=str(tmp_path / "out"), mix_ratios={"a.txt": 1}, **LM) == EXIT_FAILED
    assert "b.txt: mix_ratios has no entry for this file of a mixed split (keys: a.txt): add one" in \
        capsys.readouterr().err
    assert prepro(tmp_path, data_source=str(source), data_files={"a.txt": "train", "b.txt": "train"},
                  data_dir=str(tmp_path / "out"), mix_ratios={"a.txt": 1, "b.txt": 0}, **LM) == 2
    assert "key 'mix_ratios'" in capsys.readouterr().err


def test_the_manuals_corpus_mix_config_runs_unmixed(tmp_path, source):
    """The original XDPX's sharded example: loader corpus_mix with vocab: and no ratios, mask_whole_words."""
    write_corpora(source, {"a": 10, "b": 10})
    out = tmp_path / "out"
    options = {**LM, "vocab": LM["vocab_file"], "break_mode": "complete", "mask_whole_words": True}
    del options["vocab_file"]
    assert prepro(tmp_path, data_source=str(source), data_files={"a.txt": "train0", "b.txt": "train1"},
                  data_dir=str(out), **options) == 0
    assert set(corpus_counts(out, "train0")) == {"a"} and set(corpus_counts(out, "train1")) == {"b"}
