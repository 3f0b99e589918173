"""Processors of the bi-encoder (sentence embeddings, retrieval): each text of a record is encoded on its
own, ``tokens1`` (the query or first sentence), ``tokens2`` (its positive or second sentence) and, with the
``triplet`` loader, ``tokens3`` (a hard negative). A bi-encoder embeds each field with the same encoder, so
x-pred, x-serve's /embed and x-script build_index embed single texts with the very same processing.

``bi_encoder`` uses the run's own vocabulary (any tokenizer); ``bert_bi_encoder`` writes each text as
``[CLS] text [SEP]`` for the BERT encoders (max_len counts the two special tokens).
"""

from __future__ import annotations

from typing import Any

from xdpx.config.options import Option
from xdpx.config.ranges import any_number
from xdpx.data import loaders, processors
from xdpx.data.bert_processing import BertProcessor
from xdpx.data.loading import EXTRA_COLUMNS, LABEL_COLUMN, Loader, _counted_from_start, _distinct_columns
from xdpx.data.processing import Processor

FIELDS = ("tokens1", "tokens2", "tokens3")


class BiEncoderFields:
    """Shared by both processors: one field per text, 1 to num_texts texts per sample."""

    fields: tuple[str, ...] = FIELDS[:2]
    num_texts = 2
    text_counts = (2, 3)  # loaders whose records it takes: pair, triplet (x-prepro checks it)

    def setup_texts(self, args: Any) -> None:
        # Records of the triplet loader carry a hard negative as a third text.
        self.num_texts = 3 if args.get("loader") == "triplet" else 2
        self.fields = FIELDS[: self.num_texts]

    def wrap(self, ids: Any) -> tuple[Any, bool]:
        raise NotImplementedError

    def build_sample(self, ids: list[Any]) -> tuple[dict[str, Any], bool]:
        sample, cut = {}, False
        for name, text_ids in zip(FIELDS, ids):
            sample[name], truncated = self.wrap(text_ids)
            cut = cut or truncated
        return sample, cut

    def encode(self, fields: Any, label: str | None = None) -> dict[str, Any]:
        """A sample from raw input: one text (to embed it), or the texts of a record (and its label)."""
        if isinstance(fields, dict):
            fields, label = fields["texts"], fields.get("label", label)
        texts = [fields] if isinstance(fields, str) else list(fields)
        if not 1 <= len(texts) <= self.num_texts:
            raise ValueError(f"processor {self.args.processor!r} takes 1 to {self.num_texts} texts, got {len(texts)}")
        sample, _ = self.build_sample([self.ids_batch([t])[0] for t in texts])
        sample["id"] = 0
        if label is not None:
            sample["target"] = self.target_of(label)
        return sample

    def decode(self, sample: dict[str, Any]) -> str:
        return " ||| ".join(" ".join(self.dictionary.string(sample[f])) for f in FIELDS if f in sample)

    def collate(self, samples: list[dict[str, Any]]) -> dict[str, Any]:
        """``net_input``: ``tokens1`` [B, T1], and ``tokens2`` / ``tokens3`` when every sample has them."""
        import torch  # lazy: torch is heavy; x-prepro (and its --dry) starts without it

        present = [f for f in FIELDS if samples and all(f in s for s in samples)]
        net_input = {f: self.pad([s[f] for s in samples]) for f in present}
        return {"net_input": net_input, "target": self.collate_targets(samples),
                "id": torch.tensor([s["id"] for s in samples], dtype=torch.long),
                "nsamples": len(samples), "ntokens": sum(len(s[f]) for s in samples for f in present)}


@processors.register("bi_encoder")
class BiEncoderProcessor(BiEncoderFields, Processor):
    """Each text -> its own ``tokens<k>`` (at most max_len ids), for the non-transformer bi-encoder."""

    def __init__(self, args: Any, data_dir: str | None = None) -> None:
        super().__init__(args, data_dir)
        self.setup_texts(args)

    def wrap(self, ids: Any) -> tuple[Any, bool]:
        return (ids[: self.max_len], True) if len(ids) > self.max_len else (ids, False)


@processors.register("bert_bi_encoder")
class BertBiEncoderProcessor(BiEncoderFields, BertProcessor):
    """Each text -> its own ``[CLS] text [SEP]`` in ``tokens<k>``, for bert_bi_encoder."""

    field_dtypes: dict[str, str] = {}

    def __init__(self, args: Any, data_dir: str | None = None) -> None:
        super().__init__(args, data_dir)
        self.setup_texts(args)

    def wrap(self, ids: Any) -> tuple[Any, bool]:
        import numpy as np  # lazy: x-prepro --dry starts without numpy

        room = self.max_len - 2
        return np.concatenate(([self.cls_index], ids[:room], [self.sep_index])), len(ids) > room

    def decode(self, sample: dict[str, Any]) -> str:
        return BiEncoderFields.decode(self, sample)


@loaders.register("triplet")
class TripletLoader(Loader):
    """A query, its positive and a hard negative (a text close to the query that does not answer it) per
    record, and an optional label (the bi-encoder losses read none; regression scores work too)."""

    options = [Option("text1_column", int, default=0, validate=any_number(), doc="column of the query"),
               Option("text2_column", int, default=1, validate=any_number(), doc="column of the positive"),
               Option("text3_column", int, default=2, validate=any_number(), doc="column of the hard negative"),
               LABEL_COLUMN, EXTRA_COLUMNS,
               _distinct_columns(("text1_column", "text2_column", "text3_column", "label_column")),
               _counted_from_start(("text1_column", "text2_column", "text3_column", "label_column"))]
    text_keys = ("text1_column", "text2_column", "text3_column")
