"""tokenizer 'bert': data_dir's vocab.txt is the vocab_file line for line, so a token's id is its line in both,
even when the file repeats a token (a vocab.txt built from the tokenizer's token -> id map lost the repeats,
shifted the ids of the tokens between against their lines, and made a second x-prepro into the same data_dir
refuse its own vocab_file). The committed Chinese vocabulary once had such repeats: three empty lines that
examples/prepare_data.py made by splitting the package's file at U+2028 and the like."""

from __future__ import annotations

from pathlib import Path

from data_helpers import CHINESE_VOCAB, ROOT, prepro

from xdpx.data.dataset import open_split

REVIEWS = ROOT / "examples" / "data" / "sample" / "reviews"


def test_vocab_txt_is_the_vocab_file_line_for_line_and_a_second_run_adds_to_it(tmp_path: Path) -> None:
    original = CHINESE_VOCAB.read_text(encoding="utf-8").split("\n")[:-1]
    assert len(original) == 21128 and "" not in original  # bert-base-chinese's layout, one token a line
    lines = original[:500] + ["", ""] + original[500:]  # a token written twice (here: the empty one)
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    config = {"data_source": str(REVIEWS), "data_dir": str(tmp_path / "data"), "processor": "bert_single",
              "tokenizer": "bert", "vocab_file": str(vocab_file), "loader": "single", "parser": "tsv",
              "text_column": 0, "label_column": 1, "max_len": 64, "workers": 1}
    assert prepro(tmp_path, data_files={"train.txt": "train"}, **config) == 0
    written = (tmp_path / "data" / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert written == lines
    # ids are lines: the first review's tokens, read back through vocab.txt, are WordPiece's tokens of its text
    text = (REVIEWS / "train.txt").read_text(encoding="utf-8").splitlines()[0].split("\t")[0]
    sample = open_split(str(tmp_path / "data"), "train")[0]
    from tokenizers import BertWordPieceTokenizer

    expected = BertWordPieceTokenizer(str(vocab_file)).encode(text, add_special_tokens=True).tokens[:64]
    ids = [int(i) for i in sample["input_ids"]]
    assert [written[i] for i in ids][1:-1] == expected[1:len(ids) - 1]
    # the same vocab_file into the same data_dir: another split is added, not refused
    assert prepro(tmp_path, "second", data_files={"dev.txt": "dev"}, **config) == 0
    assert open_split(str(tmp_path / "data"), "dev") is not None
