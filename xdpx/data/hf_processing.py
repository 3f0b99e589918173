"""Processors for transformers models: the checkpoint's own tokenizer (``tokenizer: auto``, its tokenizer.json
copied into data_dir) with its own special tokens and pair template, read from the tokenizer's
post-processor: ``[CLS] a [SEP] b [SEP]`` with token types 0/1 for BERT, ``<s> a </s></s> b </s>`` for
RoBERTa / XLM-R, ``[CLS] a [SEP] b [SEP]`` for DeBERTa and ModernBERT, whatever tokenizer.json says.

Fields are the BERT processors' (input_ids, token_type_ids; collate adds attention_mask), so everything
that batches, exports or serves BERT data takes these too. max_len counts the special tokens; a pair is
cut longest first, as transformers' ``truncation="longest_first"``.
"""

from __future__ import annotations

from typing import Any

from xdpx.config.options import Rule
from xdpx.data import processors
from xdpx.data.bert_processing import BertProcessor, pad_multiple
from xdpx.data.processing import Processor


class Template:
    """The tokenizer's post-processing as a list of parts: ``("special", id, type)`` or ``("text", k, type)``
    (the k-th text goes there). Learnt once from the encoding of a probe text (or pair): the library's own
    template (TemplateProcessing, RobertaProcessing, BertProcessing) decides, nothing is hard-coded."""

    def __init__(self, tokenizer: Any, texts: int) -> None:
        text = "a" if tokenizer.encode("a", add_special_tokens=False).ids else "hello world"
        post = tokenizer.encode(text, text if texts == 2 else None, add_special_tokens=True)
        self.parts: list[tuple[str, int, int]] = []
        previous = None
        for token_id, sequence, token_type in zip(post.ids, post.sequence_ids, post.type_ids, strict=True):
            if sequence is None:
                self.parts.append(("special", token_id, token_type))
                previous = None
            elif sequence != previous:
                self.parts.append(("text", sequence, token_type))
                previous = sequence
        self.specials = sum(1 for kind, _, _ in self.parts if kind == "special")

    def join(self, texts: list[Any]) -> dict[str, Any]:
        import numpy as np  # lazy: x-prepro --dry starts without numpy

        ids, types = [], []
        for kind, value, token_type in self.parts:
            piece = np.asarray([value] if kind == "special" else texts[value], dtype=np.int64)
            ids.append(piece)
            types.append(np.full(len(piece), token_type, dtype=np.int64))
        return {"input_ids": np.concatenate(ids), "token_type_ids": np.concatenate(types)}


class HFProcessor(BertProcessor):
    """Shared parts: the template from data_dir/tokenizer.json, truncation, BERT's collate."""

    options = [Rule(lambda a: a.tokenizer == "auto",
                    "processors hf_single / hf_pair use the model's own tokenizer: set tokenizer: auto and "
                    "tokenizer_dir: the model folder (the one with tokenizer.json)", keys=("tokenizer", "processor"))]

    @classmethod
    def special_words(cls, args: Any) -> list[str]:
        return []

    def __init__(self, args: Any, data_dir: str | None = None) -> None:
        Processor.__init__(self, args, data_dir)  # not BertProcessor's: no [CLS]/[SEP] words to look up
        self.pad_multiple = pad_multiple(args)
        self.template = Template(self.tokenizer.tokenizer, self.num_texts)
        if self.max_len <= self.template.specials:
            raise ValueError(f"max_len {self.max_len} leaves no room for text beside the tokenizer's "
                             f"{self.template.specials} special tokens")

    def decode(self, sample: dict[str, Any]) -> str:
        return " ".join(self.dictionary.string(sample["input_ids"]))


@processors.register("hf_single")
class HFSingleProcessor(HFProcessor):
    """One text -> the tokenizer's single template (e.g. ``<s> text </s>``); max_len counts its special tokens."""

    def build_sample(self, ids: list[Any]) -> tuple[dict[str, Any], bool]:
        room = self.max_len - self.template.specials
        return self.template.join([ids[0][:room]]), len(ids[0]) > room


@processors.register("hf_pair")
class HFPairProcessor(HFProcessor):
    """Two texts -> the tokenizer's pair template (``<s> a </s></s> b </s>``, ``[CLS] a [SEP] b [SEP]`` with
    token types 0/1...); the longer text is cut first."""

    num_texts = 2

    def build_sample(self, ids: list[Any]) -> tuple[dict[str, Any], bool]:
        a, b = len(ids[0]), len(ids[1])
        room = self.max_len - self.template.specials
        cut = a + b > room
        if cut:
            a, b = longest_first(a, b, room)
        return self.template.join([ids[0][:a], ids[1][:b]]), cut


def longest_first(a: int, b: int, room: int) -> tuple[int, int]:
    """The lengths two texts of ``a`` and ``b`` tokens keep in ``room``, as the tokenizers library's
    truncation="longest_first" (what transformers' fast tokenizers do): a shorter text that fits in half the
    room is kept whole, the longer one gets the rest; otherwise the shorter keeps ``room // 2`` and the longer
    the rest, so on an odd room the spare token goes to the longer text (to the second on a tie)."""
    if a + b <= room:
        return a, b
    half = room // 2
    if a > b:
        return (room - b, b) if b <= half else (room - half, half)
    return (a, room - a) if a <= half else (half, room - half)
