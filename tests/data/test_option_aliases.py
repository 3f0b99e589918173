"""The original XDPX's sharded-prepro spellings `vocab:` / `target_map:` are read as vocab_file / target_map_file,
with a one-line notice naming the preferred name; giving both spellings is an error naming both."""

from __future__ import annotations

from data_helpers import SAMPLES, prepro, split_bytes, write_lines

from xdpx.cli import EXIT_CONFIG

BASIC = dict(processor="single", loader="single", tokenizer="char_zh", max_len=32)


def test_vocab_and_target_map_are_read_as_the_declared_options(tmp_path, capsys):
    vocab = tmp_path / "vocab.txt"
    write_lines(vocab, ["[PAD]", "[UNK]", *"好不的了是"])
    target_map = write_lines(tmp_path / "map.txt", ["pos", "neg"])
    source = dict(data_source=str(SAMPLES / "reviews"), data_files="train.txt")
    assert prepro(tmp_path, name="declared", data_dir=str(tmp_path / "declared"), vocab_file=str(vocab),
                  target_map_file=str(target_map), **source, **BASIC) == 0
    assert "notice" not in capsys.readouterr().err
    assert prepro(tmp_path, name="manual", data_dir=str(tmp_path / "manual"), vocab=str(vocab),
                  target_map=str(target_map), **source, **BASIC) == 0
    notices = [line for line in capsys.readouterr().err.splitlines() if "notice" in line]
    config = tmp_path / "manual.hjson"
    assert notices == [f"{config}: notice: key 'vocab' is read as 'vocab_file', the preferred name: rename it",
                       f"{config}: notice: key 'target_map' is read as 'target_map_file', the preferred name: rename it"]
    assert split_bytes(tmp_path / "manual") == split_bytes(tmp_path / "declared")
    assert (tmp_path / "manual" / "vocab.txt").read_text() == vocab.read_text()
    assert (tmp_path / "manual" / "target_map.txt").read_text() == "pos\nneg\n"
    args_py = (tmp_path / "manual" / "args.py").read_text()
    assert "vocab_file" in args_py and "target_map_file" in args_py and "vocab =" not in args_py


def test_both_spellings_is_an_error_naming_both(tmp_path, capsys):
    vocab = write_lines(tmp_path / "vocab.txt", ["[PAD]", "[UNK]", "a"])
    assert prepro(tmp_path, data_source=str(SAMPLES / "reviews"), data_dir=str(tmp_path / "out"),
                  vocab=str(vocab), vocab_file=str(vocab), **BASIC) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert "keys 'vocab_file' and 'vocab' (another spelling of 'vocab_file') are both set: keep only 'vocab_file'" in err
    assert not (tmp_path / "out").exists()
