"""Parsers, loaders, tokenizers, dictionary and target map, one behaviour each."""

from __future__ import annotations

import io
from collections import Counter

import pytest
from data_helpers import CHINESE_VOCAB, SAMPLES

from xdpx.config.options import Args
from xdpx.data import loaders, parsers, tokenizers
from xdpx.data.dictionary import Dictionary
from xdpx.data.errors import BadLine
from xdpx.data.loading import Layout
from xdpx.data.targets import TargetMap


def args(**values: object) -> Args:
    return Args(values, {}, set(), {})


def test_csv_defaults_to_tabs_without_quoting():
    parser = parsers.get("csv")(args(delimiter="\t", quotechar=None))
    assert parser.parse('a "b"\tc') == ['a "b"', "c"]


def test_quoted_csv_record_may_span_lines():
    parser = parsers.get("csv")(args(delimiter=",", quotechar='"'))
    data = b'"1","first\nline"\n"-1","second ""quoted"""\n'
    records = list(parser.records(io.BytesIO(data), "x.csv"))
    assert [n for n, _ in records] == [1, 3]
    assert [parser.parse(r.decode()) for _, r in records] == [["1", "first\nline"], ["-1", 'second "quoted"']]


def test_jsonl_fields_pick_columns_and_trailing_ones_may_be_missing():
    parser = parsers.get("jsonl")(args(fields=["text", "label"]))
    assert parser.parse('{"label": 1, "text": "hi", "x": 3}') == ["hi", "1"]
    assert parser.parse('{"text": "hi"}') == ["hi"]
    with pytest.raises(BadLine, match="missing field"):
        parser.parse('{"label": 1}')
    with pytest.raises(BadLine, match="invalid JSON"):
        parser.parse("{oops")


def test_json_parser_reads_an_array():
    parser = parsers.get("json")(args(fields=None))
    records = list(parser.records(io.BytesIO(b'[{"t": "a", "l": "x"}, ["b", "y"]]'), "f.json"))
    assert [parser.parse(r) for _, r in records] == [["a", "x"], ["b", "y"]]


def test_single_loader_label_first_and_unlabelled_files():
    loader = loaders.get("single")(args(text_column=1, label_column=0))
    assert loader.is_labelled(["1", "good"]) and not loader.is_labelled(["good"])
    assert loader.fields(["1", " good "], Layout(True)) == (["good"], "1")
    assert loader.fields(["good"], Layout(False)) == (["good"], None)
    with pytest.raises(BadLine, match="at least 2 columns"):
        loader.fields(["good"], Layout(True))
    with pytest.raises(BadLine, match="empty text"):
        loader.fields(["1", " "], Layout(True))


def test_a_record_wider_than_the_first_of_its_file_is_a_bad_line():
    loader = loaders.get("single")(args(text_column=0, label_column=-1))
    layout = loader.layout_of(["a text", "pos"], line=1)
    with pytest.raises(BadLine, match=r"3 columns, but the first record of the file \(line 1\) has 2"):
        loader.fields(["a text", "with a tab", "pos"], layout)


def test_pair_loader_with_extra_columns_ignores_them():
    loader = loaders.get("pair")(args(text1_column=5, text2_column=6, label_column=4, extra_columns=True))
    first = ["g", "f", "y", "id", "4", "A man.", "A boy."]
    row = ["g", "f", "y", "id", "2.5", "A girl.", "A woman.", "extra", "more"]
    assert loader.fields(row, loader.layout_of(first)) == (["A girl.", "A woman."], "2.5")


def test_char_zh_keeps_latin_words_and_numbers_whole():
    tokenizer = tokenizers.get("char_zh")(args(lower=True))
    assert tokenizer.tokenize("买了iPhone 3.5寸，很好!") == ["买", "了", "iphone", "3.5", "寸", "，", "很", "好", "!"]


def test_space_tokenizer_lowercases():
    assert tokenizers.get("space")(args(lower=True)).tokenize("A  b\tC") == ["a", "b", "c"]


def test_bert_fast_chinese_path_gives_the_same_ids_as_wordpiece():
    lines = [line.split("\t")[0] for line in (SAMPLES / "reviews" / "train.txt").read_text().splitlines()]
    lines += ["中文English混合 abc123，ＡＢＣ！", "é à ü 中\u0301", "\u3000全角空格\t制表", "", "   "]
    fast = tokenizers.get("bert")(args(lower=True, fast_chinese=True), str(CHINESE_VOCAB))
    plain = tokenizers.get("bert")(args(lower=True, fast_chinese=False), str(CHINESE_VOCAB))
    assert [list(x) for x in fast.ids_batch(lines)] == plain.ids_batch(lines)


def test_jieba_tokenizer_splits_words():
    pytest.importorskip("jieba")
    assert tokenizers.get("jieba")(args(lower=True)).tokenize("我爱北京天安门") == ["我", "爱", "北京", "天安门"]


def test_dictionary_build_threshold_nwords_and_specials():
    counts = Counter({"a": 5, "b": 5, "c": 2, "d": 1})
    d = Dictionary.build(counts, threshold=1, specials=["[CLS]"])
    assert d.tokens == ["[PAD]", "[UNK]", "[CLS]", "a", "b", "c"]
    assert Dictionary.build(counts, nwords=1).tokens == ["[PAD]", "[UNK]", "a"]
    assert Dictionary.build(counts, threshold=3, always={"d"}).tokens == ["[PAD]", "[UNK]", "a", "b", "d"]
    assert d.lookup(["a", "zzz"]) == [3, d.unk_index]


def test_target_map_by_frequency_by_index_and_special_first():
    counts = Counter({"neg": 3, "pos": 5, "unknown": 1})
    assert TargetMap.build(counts, "text").labels == ["pos", "neg", "unknown"]
    assert TargetMap.build(counts, "text", ["unknown"]).labels == ["unknown", "pos", "neg"]
    assert TargetMap.build(Counter({"10": 1, "2": 9, "0": 1}), "index").labels == ["0", "2", "10"]
    with pytest.raises(BadLine, match="not in the target map"):
        TargetMap(["a"]).encode("b")
