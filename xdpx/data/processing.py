"""Processors: tokens -> ids on disk (x-prepro), and samples -> padded batches (x-train, x-eval, x-pred).

The same processor object serves preprocessing and inference (``encode`` on raw text), so training and
inference cannot tokenize differently. Subclasses say which token fields they store and how to batch.
This module holds the base class and the processors for non-transformer models (own vocabulary);
bert_processing.py holds the BERT ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xdpx import io
from xdpx.data import processors, tokenizers
from xdpx.data.dictionary import Dictionary
from xdpx.data.targets import TargetMap, label_names, regression_value

VOCAB_FILE, TARGET_MAP_FILE = "vocab.txt", "target_map.txt"


def find_target_map(*folders: str | None) -> tuple[str, list[str]] | None:
    """(path, labels in id order) of the first of ``folders`` holding target_map.txt; None when none does."""
    for folder in folders:
        if folder and io.exists(io.join(folder, TARGET_MAP_FILE)):
            path = io.join(folder, TARGET_MAP_FILE)
            with io.open(path) as f:
                return path, [line.rstrip("\r\n") for line in f if line.strip()]
    return None
IGNORE_INDEX = -100  # target of positions that carry no loss (MLM: unmasked tokens); torch's default


class Processor:
    """Base class. Build with ``processors.get(args.processor)(args)``: reads vocab.txt and
    target_map.txt from ``args.data_dir`` (or the given ``data_dir``)."""

    options: list[Any] = []
    fields: tuple[str, ...] = ()  # token fields stored per sample
    field_dtypes: dict[str, str] = {}  # fields not stored in the vocabulary's narrowest type
    num_texts = 1
    is_corpus = False  # builds samples from a stream of lines (see bert_lm)

    @classmethod
    def special_words(cls, args: Any) -> list[str]:
        """Words a vocabulary built from the data must hold besides pad_word and unk_word."""
        return []

    def __init__(self, args: Any, data_dir: str | None = None) -> None:
        self.args = args
        data_dir = data_dir or args.data_dir
        self.data_dir = data_dir
        self.dictionary = Dictionary.load(io.join(data_dir, VOCAB_FILE), args.pad_word, args.unk_word)
        target_map_path = io.join(data_dir, TARGET_MAP_FILE)
        self.target_type = args.get("target_type", "text")
        self.target_map = TargetMap.load(target_map_path, args.get("target_unk")) \
            if self.target_type != "regression" and io.exists(target_map_path) else None
        self.tokenizer = tokenizers.get(args.tokenizer)(args, io.join(data_dir, VOCAB_FILE))
        self.max_len, self.min_len = args.max_len, args.get("min_len", 1)
        self.pad_index = self.dictionary.pad_index
        self.seed = args.get("seed", 1)
        self.epoch = 0

    # ---- text -> ids ---------------------------------------------------------------------------
    def ids_batch(self, texts: list[str]) -> list[Any]:
        """Token ids of each text (no special tokens), as numpy int arrays."""
        import numpy as np  # lazy: x-prepro --dry starts without numpy

        if self.tokenizer.has_own_vocab:
            return [np.asarray(ids, dtype=np.int64) for ids in self.tokenizer.ids_batch(texts)]
        lookup = self.dictionary.lookup
        return [np.asarray(lookup(tokens), dtype=np.int64) for tokens in self.tokenizer.tokenize_batch(texts)]

    def build_sample(self, ids: list[Any]) -> tuple[dict[str, Any], bool]:
        """The token fields of one sample from the ids of its texts, and whether it was truncated."""
        raise NotImplementedError

    def numerize_batch(self, texts: Sequence[list[str]]) -> list[tuple[dict[str, Any], bool] | None]:
        """Samples for many records (``None`` for a record with a text shorter than min_len)."""
        columns = [self.ids_batch([t[k] for t in texts]) for k in range(self.num_texts)]
        out: list[tuple[dict[str, Any], bool] | None] = []
        for i in range(len(texts)):
            ids = [column[i] for column in columns]
            out.append(None if any(len(x) < self.min_len for x in ids) else self.build_sample(ids))
        return out

    def target_of(self, label: str) -> float | int:
        if self.target_type == "regression":
            return regression_value(label)
        if self.target_map is None:
            raise ValueError("this data_dir has no target_map.txt: it holds no labelled data")
        if self.target_type == "multilabel":  # a multi-hot row over the target map
            import numpy as np  # lazy: x-prepro --dry starts without numpy

            row = np.zeros(len(self.target_map), dtype=np.uint8)
            row[self.target_map.encode_set(label_names(label, self.args))] = 1
            return row
        return self.target_map.encode(label)

    def encode(self, fields: Any, label: str | None = None) -> dict[str, Any]:
        """A sample from raw input: a text, a list of texts, or {'texts': [...], 'label': ...}."""
        if isinstance(fields, dict):
            fields, label = fields["texts"], fields.get("label", label)
        texts = [fields] if isinstance(fields, str) else list(fields)
        if len(texts) != self.num_texts:
            raise ValueError(f"processor {self.args.processor!r} takes {self.num_texts} text(s), got {len(texts)}")
        ids = [column[0] for column in (self.ids_batch([t]) for t in texts)]
        sample, _ = self.build_sample(ids)
        sample["id"] = 0
        if label is not None:
            sample["target"] = self.target_of(label)
        return sample

    # ---- ids -> text ---------------------------------------------------------------------------
    def decode(self, sample: dict[str, Any]) -> str:
        """The sample's tokens as text (fields separated by ' ||| '), for inspection."""
        return " ||| ".join(" ".join(self.dictionary.string(sample[f])) for f in self.fields)

    def decode_target(self, target: Any) -> str:
        if target is None:
            return ""
        if self.target_type == "regression" or self.target_map is None:
            return f"{float(target):g}"
        if self.target_type == "multilabel":
            separator = self.args.get("label_separator") or "|"
            return separator.join(self.target_map.labels[k] for k, on in enumerate(target) if on)
        return self.target_map.labels[int(target)]

    # ---- batches -------------------------------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """Called before each epoch: per-sample randomness (MLM masks) comes from (seed, epoch, id)."""
        self.epoch = epoch

    def pad(self, arrays: list[Any], pad_value: int | None = None) -> Any:
        import numpy as np  # lazy: x-prepro --dry starts without numpy
        import torch  # lazy: torch is heavy; x-prepro (and its --dry) starts without it

        width = max((len(a) for a in arrays), default=0)
        out = np.full((len(arrays), width), self.pad_index if pad_value is None else pad_value, dtype=np.int64)
        for i, a in enumerate(arrays):
            out[i, : len(a)] = a
        return torch.from_numpy(out)

    def collate_targets(self, samples: list[dict[str, Any]]) -> Any:
        import torch  # lazy: torch is heavy; x-prepro (and its --dry) starts without it

        if not samples or "target" not in samples[0]:
            return None
        if self.target_type == "multilabel":  # multi-hot rows [B, C], float for the sigmoid loss
            import numpy as np  # lazy: x-prepro --dry starts without numpy

            return torch.from_numpy(np.stack([np.asarray(s["target"]) for s in samples]).astype(np.float32))
        dtype = torch.float32 if self.target_type == "regression" else torch.long
        return torch.tensor([s["target"] for s in samples], dtype=dtype)

    def collate(self, samples: list[dict[str, Any]]) -> dict[str, Any]:
        """{'net_input': {field: LongTensor [B, T]}, 'target', 'id', 'nsamples', 'ntokens'}."""
        import torch  # lazy: torch is heavy; x-prepro (and its --dry) starts without it

        net_input = {f: self.pad([s[f] for s in samples]) for f in self.fields}
        return {"net_input": net_input, "target": self.collate_targets(samples),
                "id": torch.tensor([s["id"] for s in samples], dtype=torch.long),
                "nsamples": len(samples), "ntokens": sum(len(s[f]) for s in samples for f in self.fields)}


def _truncate(ids: Any, length: int) -> tuple[Any, bool]:
    return (ids[:length], True) if len(ids) > length else (ids, False)


@processors.register("single")
class SingleProcessor(Processor):
    """One text -> ``tokens`` (at most max_len ids). For non-transformer classifiers."""

    fields = ("tokens",)

    def build_sample(self, ids: list[Any]) -> tuple[dict[str, Any], bool]:
        tokens, cut = _truncate(ids[0], self.max_len)
        return {"tokens": tokens}, cut


@processors.register("pair")
class PairProcessor(Processor):
    """Two texts -> ``tokens1``, ``tokens2`` (each at most max_len ids). For matching models (re2, ...)."""

    fields = ("tokens1", "tokens2")
    num_texts = 2

    def build_sample(self, ids: list[Any]) -> tuple[dict[str, Any], bool]:
        first, cut1 = _truncate(ids[0], self.max_len)
        second, cut2 = _truncate(ids[1], self.max_len)
        return {"tokens1": first, "tokens2": second}, cut1 or cut2
