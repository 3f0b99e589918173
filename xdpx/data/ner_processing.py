"""Token-classification processors: ``ner`` (a vocabulary of units: characters or whitespace tokens, for
lstm_ner) and ``bert_ner`` (BERT subwords, first-subword labelling, for bert_ner).

A sample stores its token field(s) and, when labelled, ``tags``: one tag id per unit (a token field of its
own, memory-mapped like the others; docs/prepro.md). ``bert_ner`` also stores ``word_starts`` (1 on the
first subword of each unit). A collated batch has ``target`` ``[B, U]`` (tag ids, -100 after a sentence's
last unit) and ``unit_mask`` ``[B, T]`` (True on the token that carries each unit's tag), with which the
loss and the task pick the units' rows out of the model's per-token outputs. Subwords after a unit's first
carry no tag: they are not in the loss. max_len keeps whole units only.

Samples made from raw text (``numerize_batch``, ``encode``: x-eval, x-pred, x-serve) also keep the ``text``
and each kept unit's character ``offsets`` (not stored by x-prepro), from which x-pred and x-serve report
entities as spans of the input.
"""

from __future__ import annotations

from typing import Any

from xdpx.config.options import Rule
from xdpx.data import processors
from xdpx.data.bert_processing import SPECIAL_OPTIONS, BertProcessor
from xdpx.data.errors import BadLine
from xdpx.data.processing import IGNORE_INDEX, Processor
from xdpx.data.tags import units_of

TAGS = "tags"
UNIT_TOKENIZERS = {"char": "char", "whitespace": "space"}


class TagTargets:
    """What both processors share: tag ids as a token field, the unit mask, raw-input offsets."""

    target_field = TAGS
    num_texts = 1

    def field_target(self: Any, sample: dict[str, Any], label: str) -> Any:
        """The tag ids of ``label`` (the loader's tags, one per unit) for the units ``sample`` kept."""
        import numpy as np  # lazy: x-prepro --dry starts without numpy

        if self.target_map is None:
            raise ValueError("this data_dir has no target_map.txt: it holds no labelled data")
        tags = label.split(" ") if label else []
        return np.asarray([self.target_map.encode(t) for t in tags[: self.unit_count(sample)]], dtype=np.int64)

    def encode(self: Any, fields: Any, label: str | None = None) -> dict[str, Any]:
        if isinstance(fields, dict):
            fields, label = fields["texts"], fields.get("label", label)
        texts = [fields] if isinstance(fields, str) else list(fields)
        if len(texts) != 1:
            raise BadLine(f"processor {self.args.processor!r} takes one text, got {len(texts)}")
        built = self.numerize_batch([texts])[0]
        if built is None:
            raise BadLine(f"a text shorter than min_len {self.min_len} units")
        sample = built[0]
        sample["id"] = 0
        if label is not None:
            sample[TAGS] = self.field_target(sample, label)
        return sample

    def with_offsets(self: Any, texts: Any, built: list[Any]) -> list[Any]:
        """Samples with their raw ``text`` and the character ``offsets`` of their kept units (not stored by
        x-prepro; x-pred and x-serve report entities as spans of the text)."""
        for record, sample in zip(texts, built):
            if sample is not None:
                sample[0]["text"] = record[0]
                sample[0]["offsets"] = units_of(record[0], self.args.tag_unit)[: self.unit_count(sample[0])]
        return built

    def tag_batch(self: Any, samples: list[dict[str, Any]], unit_mask: Any) -> dict[str, Any]:
        if samples and TAGS in samples[0]:
            target = Processor.pad(self, [s[TAGS] for s in samples], pad_value=IGNORE_INDEX)
        else:
            target = None
        return {"target": target, "unit_mask": unit_mask}


@processors.register("ner")
class NerProcessor(TagTargets, Processor):
    """One text -> ``tokens``: one id per unit (tokenizer char for tag_unit char, space for whitespace)."""

    options = [Rule(lambda a: a.get("tokenizer") == UNIT_TOKENIZERS.get(a.get("tag_unit")),
                    "processor ner looks units up in its vocabulary: use tokenizer: char with tag_unit: char and "
                    "tokenizer: space with tag_unit: whitespace (or processor bert_ner for subwords)",
                    keys=("processor", "tokenizer", "tag_unit"))]
    fields = ("tokens",)
    field_dtypes = {TAGS: "uint16"}

    def build_sample(self, ids: list[Any]) -> tuple[dict[str, Any], bool]:
        return {"tokens": ids[0][: self.max_len]}, len(ids[0]) > self.max_len

    def numerize_batch(self, texts: Any) -> list[tuple[dict[str, Any], bool] | None]:
        return self.with_offsets(texts, super().numerize_batch(texts))

    def unit_count(self, sample: dict[str, Any]) -> int:
        return len(sample["tokens"])

    def collate(self, samples: list[dict[str, Any]]) -> dict[str, Any]:
        batch = super().collate(samples)
        batch.update(self.tag_batch(samples, batch["net_input"]["tokens"].ne(self.pad_index)))
        return batch


@processors.register("bert_ner")
class BertNerProcessor(TagTargets, BertProcessor):
    """One text -> [CLS] subwords of each unit [SEP]; ``word_starts`` marks each unit's first subword (a
    unit with no subword, e.g. a control character, becomes [UNK]). Needs tokenizer bert (or auto)."""

    options = [*SPECIAL_OPTIONS,
               Rule(lambda a: a.get("tokenizer") in ("bert", "auto"),
                    "processor bert_ner needs a subword tokenizer: tokenizer: bert (or auto)",
                    keys=("processor", "tokenizer"))]
    fields = ("input_ids", "token_type_ids", "word_starts")
    field_dtypes = {"token_type_ids": "uint8", "word_starts": "uint8", TAGS: "uint16"}

    def numerize_batch(self, texts: Any) -> list[tuple[dict[str, Any], bool] | None]:
        import numpy as np  # lazy: x-prepro --dry starts without numpy

        unit_texts = [[t[0][a:b] for a, b in units_of(t[0], self.args.tag_unit)] for t in texts]
        flat = self.ids_batch([u for units in unit_texts for u in units]) if any(unit_texts) else []
        unk = self.dictionary.unk_index
        out: list[tuple[dict[str, Any], bool] | None] = []
        position = 0
        room = self.max_len - 2
        for units in unit_texts:
            pieces = [p if len(p) else np.asarray([unk], dtype=np.int64) for p in flat[position: position + len(units)]]
            position += len(units)
            kept, used = 0, 0
            while kept < len(pieces) and used + len(pieces[kept]) <= room:  # whole units only
                used += len(pieces[kept])
                kept += 1
            if kept < max(self.min_len, 1):
                out.append(None)
                continue
            ids = np.concatenate(pieces[:kept]) if kept else np.zeros(0, np.int64)
            starts = np.concatenate([np.eye(1, len(p), dtype=np.int64)[0] for p in pieces[:kept]])
            sample = self.join([ids])
            sample["word_starts"] = np.concatenate([[0], starts, [0]]).astype(np.int64)
            out.append((sample, kept < len(pieces)))
        return self.with_offsets(texts, out)

    def unit_count(self, sample: dict[str, Any]) -> int:
        return int(sample["word_starts"].sum())

    def decode(self, sample: dict[str, Any]) -> str:
        tokens = self.dictionary.string(sample["input_ids"])
        return " ".join(t for t, s in zip(tokens, sample["word_starts"]) if s)

    def collate(self, samples: list[dict[str, Any]]) -> dict[str, Any]:
        batch = super().collate(samples)
        batch.update(self.tag_batch(samples, self.pad([s["word_starts"] for s in samples], pad_value=0).bool()))
        return batch
