"""x-prepro of NER data: CoNLL and jsonl inputs, tag schemes, subword alignment, bad lines with file:line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ner_helpers import CHINESE_VOCAB, SAMPLE, write_json

from xdpx.cli import run_chain
from xdpx.config.options import Args
from xdpx.config.writers import read_args
from xdpx.data import loaders, parsers, processors
from xdpx.data.dataset import open_split


def conll_sentences(path: Path) -> list[list[tuple[str, str]]]:
    blocks = path.read_text(encoding="utf-8").strip("\n").split("\n\n")
    return [[tuple(line.split("\t")) for line in block.splitlines()] for block in blocks]


def reader(**options: object) -> tuple[object, object, object]:
    args = Args({"tag_scheme": "bio", "tag_unit": "char", **options}, {}, set(), {})
    return parsers.get("conll")(args), parsers.get("ner_jsonl")(args), loaders.get("ner")(args)


def test_conll_sample_is_stored_as_one_tag_per_character(ner_data):
    labels = (ner_data / "target_map.txt").read_text(encoding="utf-8").split()
    assert sorted(labels) == ["B-LOC", "B-ORG", "B-PER", "I-LOC", "I-ORG", "I-PER", "O"]
    vocab = (ner_data / "vocab.txt").read_text(encoding="utf-8").split("\n")
    data = open_split(str(ner_data), "dev")
    for i, sentence in enumerate(conll_sentences(SAMPLE / "dev.conll")):
        sample, sentence = data[i], sentence[:64]  # max_len 64
        assert [vocab[k] for k in sample["tokens"]] == [c if c in vocab else "[UNK]" for c, _ in sentence]
        assert [labels[k] for k in sample["tags"]] == [t for _, t in sentence]


def test_the_report_counts_conll_sentences_as_sentences(ner_data):
    # a CoNLL record is a sentence of several lines: the report must not call the 100 sentences "lines"
    assert "dev: 100 samples from 100 sentences of dev.conll;" in (ner_data / "log.txt").read_text(encoding="utf-8")


def test_jsonl_spans_and_conll_tags_give_the_same_samples():
    conll, jsonl, loader = reader()
    records = (SAMPLE / "dev.jsonl").read_text(encoding="utf-8").splitlines()
    with open(SAMPLE / "dev.conll", "rb") as f:
        sentences = [conll.parse(raw.decode()) for _, raw in conll.records(f, "dev.conll")]
    assert len(records) == len(sentences) == 100
    for record, columns in zip(records, sentences):
        from_json = loader.fields(jsonl.parse(record), loader.layout_of([1, 2]))
        from_conll = loader.fields(columns, loader.layout_of(columns))
        assert from_json == from_conll and from_json[0][0] == json.loads(record)["text"]


def test_bioes_scheme_rewrites_the_files_tags():
    _, jsonl, loader = reader(tag_scheme="bioes")
    texts, tags = loader.fields(jsonl.parse('{"text": "江泽民在北京", "entities": [[0, 3, "PER"], [4, 5, "LOC"]]}'),
                                loader.layout_of([1, 2]))
    assert tags.names() == ["B-PER", "I-PER", "E-PER", "O", "S-LOC", "O"]
    # BIO tags of a file, read and written in BIOES; an I- without B- is read as conlleval reads it
    conll, _, loader = reader(tag_scheme="bioes")
    assert loader.fields(["江泽民在", "I-PER I-PER I-PER O"], loader.layout_of([1, 2]))[1].names() == \
        ["B-PER", "I-PER", "E-PER", "O"]


@pytest.mark.parametrize("name,content,where,reason", [
    ("train.conll", "江\tB-PER\n泽\tI-PER\n\n北\tB-LOC\n京\n", "train.conll:5", "1 column(s), but the sentence's first"),
    ("train.conll", "江\tB-PER\n泽\tX-PER\n", "train.conll:2", "tag 'X-PER' is neither O nor"),
    ("train.jsonl", '{"text": "北京", "entities": []}\n{"text": "北京", "entities": [[1, 3, "LOC"]]}\n',
     "train.jsonl:2", "does not begin and end on unit boundaries"),
], ids=["conll-missing-tag", "conll-bad-tag", "jsonl-span-outside"])
def test_bad_input_stops_with_file_and_line(tmp_path, capsys, name, content, where, reason):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / name).write_text(content, encoding="utf-8")
    config = write_json(tmp_path / "prepro.hjson", {
        "data_source": str(tmp_path / "src"), "data_files": name, "data_dir": str(tmp_path / "data"),
        "parser": "ner_jsonl" if name.endswith("jsonl") else "conll", "loader": "ner", "tag_unit": "char",
        "processor": "ner", "tokenizer": "char", "max_len": 50, "workers": 1})
    assert run_chain(["x-prepro", str(config)]) != 0
    err = capsys.readouterr().err
    assert f"{tmp_path / 'src' / where}: " in err and reason in err, err


def test_nan_inside_an_entity_is_a_bad_line(tmp_path, capsys):
    """Python's json reads NaN (pandas' missing offset): the record is a bad line, never a TypeError."""
    (tmp_path / "src").mkdir()
    good = '{"text": "北京", "entities": [[0, 2, "LOC"]]}\n'
    (tmp_path / "src" / "train.jsonl").write_text(good * 30 + '{"text": "北京", "entities": [[0, NaN, "LOC"]]}\n',
                                                  encoding="utf-8")
    options = {"data_source": str(tmp_path / "src"), "data_files": "train.jsonl", "data_dir": str(tmp_path / "data"),
               "parser": "ner_jsonl", "loader": "ner", "tag_unit": "char", "processor": "ner", "tokenizer": "char",
               "max_len": 50, "workers": 1}
    assert run_chain(["x-prepro", str(write_json(tmp_path / "prepro.hjson", options))]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'src' / 'train.jsonl'}:31: an entity holds NaN, not a number" in err, err
    assert "Traceback" not in err and not (tmp_path / "data").exists()
    # skip_bad_lines drops and counts it: 30 samples, the NaN line named
    skipping = write_json(tmp_path / "skip.hjson", {**options, "skip_bad_lines": True})
    assert run_chain(["x-prepro", str(skipping)]) == 0
    out = capsys.readouterr()
    assert f"skipped {tmp_path / 'src' / 'train.jsonl'}:31: an entity holds NaN" in out.err + out.out
    assert "train: 30" in (tmp_path / "data" / "meta.hjson").read_text()


def test_bert_subwords_carry_the_tag_on_the_first_piece_only(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.conll").write_text(
        "-DOCSTART-\tO\n\nJohnson\tB-PER\nvisited\tO\nWashington\tB-LOC\nyesterday\tO\n\n"
        "EU\tB-ORG\nrejects\tO\nGerman\tB-MISC\ncall\tO\n", encoding="utf-8")
    config = write_json(tmp_path / "prepro.hjson", {
        "data_source": str(tmp_path / "src"), "data_files": "train.conll", "data_dir": str(tmp_path / "data"),
        "parser": "conll", "loader": "ner", "tag_unit": "whitespace", "processor": "bert_ner", "tokenizer": "bert",
        "vocab_file": CHINESE_VOCAB, "max_len": 8, "workers": 1})
    assert run_chain(["x-prepro", str(config)]) == 0
    data = open_split(str(tmp_path / "data"), "train")
    labels = (tmp_path / "data" / "target_map.txt").read_text().split()
    # johnson | vi ##site ##d | washington | yes ##ter ##day (cut: max_len 8 keeps whole units only)
    first = data[0]
    assert first["word_starts"].tolist() == [0, 1, 1, 0, 0, 1, 0]
    assert [labels[k] for k in first["tags"]] == ["B-PER", "O", "B-LOC"]
    # e ##u | re ##ject ##s | ge ##rman | call
    second = data[1]
    assert second["word_starts"].tolist() == [0, 1, 0, 1, 0, 0, 0]
    assert [labels[k] for k in second["tags"]] == ["B-ORG", "O"]
    processor = processors.get("bert_ner")(Args(read_args(str(tmp_path / "data/args.py")), {}, set(), {}),
                                           data_dir=str(tmp_path / "data"))
    batch = processor.collate([first, second])
    assert batch["unit_mask"].sum(1).tolist() == [3, 2]
    assert batch["target"].tolist() == [[labels.index(t) for t in ("B-PER", "O", "B-LOC")],
                                        [labels.index("B-ORG"), labels.index("O"), -100]]


def test_major_metric_of_an_entity_type_must_be_in_the_target_map(ner_data, tmp_path, capsys):
    from ner_helpers import train_config

    config = train_config(tmp_path / "train.hjson", ner_data, tmp_path / "run", major_metric="entity_f1_MISC")
    assert run_chain(["x-train", str(config)]) != 0
    err = capsys.readouterr().err
    assert "'entity_f1_MISC' names no entity type of the target map" in err and "entity_f1_PER" in err
    assert not list((tmp_path / "run").glob("checkpoint*"))
