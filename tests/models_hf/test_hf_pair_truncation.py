"""hf_pair cuts two texts that compete for room as transformers' fast tokenizers do (truncation="longest_first").

The rule, stated independently of the code: with ``room`` = max_len minus the template's special tokens,
a pair that fits is kept whole. Otherwise, when the shorter text fits in half the room (``room // 2``), it
is kept whole and the longer one gets the rest; when both are longer than that, the shorter one keeps
``room // 2`` tokens and the longer one ``room - room // 2`` (on an odd room the spare token goes to the longer
text; on a tie, the second text counts as the longer). The expected counts below are written out by hand.

A word-level tokenizer (one token per word ``a0 a1 ...`` / ``b0 b1 ...``) makes the token counts those of
the words, so each case reads: (words of text a, words of text b, max_len) -> (tokens kept of a, of b).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from xdpx.cli import run_chain

pytest.importorskip("transformers")

# [CLS] a [SEP] b [SEP]: 3 special tokens, room = max_len - 3
CASES = [
    # both fit: nothing cut
    (4, 3, 10, 4, 3),
    (3, 4, 10, 3, 4),
    # the shorter fits in half the room: kept whole, the longer gets the rest
    (3, 12, 10, 3, 4),
    (12, 3, 10, 4, 3),
    (2, 12, 11, 2, 6),
    # both long, even room (8): 4 each, whichever is longer
    (12, 10, 11, 4, 4),
    (10, 12, 11, 4, 4),
    # both long, odd room (7): the longer text keeps the spare token
    (12, 10, 10, 4, 3),
    (10, 12, 10, 3, 4),
    (6, 5, 10, 4, 3),
    (5, 6, 10, 3, 4),
    (11, 10, 10, 4, 3),
    # a tie on an odd room: the second text keeps the spare token
    (10, 10, 10, 3, 4),
    (5, 5, 10, 3, 4),
    (4, 4, 10, 3, 4),
    # a tie on an even room
    (9, 9, 11, 4, 4),
]


def word_level_model(folder: Path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    words = specials + [f"{side}{i}" for side in "ab" for i in range(16)]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]")
    fast.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def pair_data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(data_dir of an hf_pair x-prepro with the word-level tokenizer, the tokenizer folder)."""
    root = tmp_path_factory.mktemp("hf_pair_truncation")
    model = word_level_model(root / "model")
    raw = root / "raw"
    raw.mkdir()
    for split in ("train", "dev"):
        (raw / f"{split}.txt").write_text("1\ta0 a1\tb0 b1\n0\ta2\tb2 b3\n")
    config = root / "prepro.json"
    config.write_text(json.dumps({"data_source": str(raw), "data_dir": str(root / "data"), "workers": 1,
                                  "tokenizer": "auto", "tokenizer_dir": str(model), "processor": "hf_pair",
                                  "loader": "pair", "label_column": 0, "text1_column": 1, "text2_column": 2,
                                  "max_len": 10}))
    assert run_chain(["x-prepro", str(config)]) == 0
    return root / "data", model


def pair_processor(data_dir: Path, max_len: int) -> Any:
    from xdpx.config.options import Args
    from xdpx.data import processors
    from xdpx.data.meta import read_meta

    values = {**read_meta(str(data_dir)), "data_dir": str(data_dir), "seed": 1, "max_len": max_len}
    return processors.get("hf_pair")(Args(values, {}, set(), {}))


def words(side: str, count: int) -> str:
    return " ".join(f"{side}{i}" for i in range(count))


@pytest.mark.parametrize(("len_a", "len_b", "max_len", "kept_a", "kept_b"), CASES)
def test_two_long_texts_share_the_room_by_the_longest_first_rule(pair_data, len_a, len_b, max_len, kept_a, kept_b):
    data_dir, _ = pair_data
    sample = pair_processor(data_dir, max_len).encode([words("a", len_a), words("b", len_b)])
    tokens = pair_processor(data_dir, max_len).dictionary.string(sample["input_ids"])
    assert tokens == ["[CLS]", *words("a", kept_a).split(), "[SEP]", *words("b", kept_b).split(), "[SEP]"]
    assert sample["token_type_ids"].tolist() == [0] * (kept_a + 2) + [1] * (kept_b + 1)


@pytest.mark.parametrize(("len_a", "len_b", "max_len", "kept_a", "kept_b"), CASES)
def test_the_hand_written_counts_are_transformers_own(pair_data, len_a, len_b, max_len, kept_a, kept_b):
    """The statement above is the library's rule: its fast tokenizer keeps the same counts."""
    from transformers import AutoTokenizer

    _, model = pair_data
    reference = AutoTokenizer.from_pretrained(str(model))
    encoded = reference(words("a", len_a), words("b", len_b), truncation="longest_first", max_length=max_len)
    sequences = encoded.sequence_ids()
    assert (sequences.count(0), sequences.count(1)) == (kept_a, kept_b)
