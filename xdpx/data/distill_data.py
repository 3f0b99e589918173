"""Data for distillation: teacher logits read beside the texts, and the raw texts kept for an online teacher.

Static distillation reads what ``x-pred`` wrote with ``distill: true, concat_origin: true``: the record's
own columns, then one ``logit_<label>`` column per class. Loaders ``single_with_logits`` /
``pair_with_logits`` take the last ``num_logits`` columns of such a record as the teacher's logits and read
the columns before them as loader ``single`` / ``pair`` would; processors of the same names store them as
a float32 field ``logits`` (``{split}.logits.bin/.idx``, memory-mapped like the token fields) and collate
them into ``batch['teacher_logits']`` ``[B, num_logits]``.

Whether a file carries logits is read from its width, as labelled / unlabelled is (docs/prepro.md):
with n texts and k logits, a record of n columns is texts only, n + 1 texts and label, n + k texts and
logits, n + k + 1 texts, label and logits. So a labelled set, a larger unlabelled corpus scored by the
teacher (no label), and plain dev / test files all go through the same config. (With k = 1, n + 1
columns read as texts and label.) A sample without logits stores an empty row.

``keep_texts: true`` stores each text's UTF-8 bytes as fields ``text`` (``text1``, ``text2`` for pairs), so
that an online teacher with a tokenization of its own (``task: distill, teacher: ...``) encodes the very
texts the student was made from: ``batch['texts']`` holds them (a list per sample).
"""

from __future__ import annotations

import math
from typing import Any

from xdpx.config.options import Option, Rule
from xdpx.config.ranges import at_least
from xdpx.data import loaders, processors
from xdpx.data.bert_processing import BertPairProcessor, BertSingleProcessor
from xdpx.data.errors import BadLine
from xdpx.data.loading import Layout, PairLoader, SingleLoader
from xdpx.data.processing import IGNORE_INDEX, PairProcessor, SingleProcessor

LOGITS_FIELD = "logits"


class TextWithLogits(str):
    """A text that carries its record's teacher logits from the loader to the processor.

    The chunk worker hands the loader's texts to the processor unchanged (and tokenizes them as plain
    strings when it counts the vocabulary), so the logits travel with the first text instead of as a
    column the vocabulary count would read as words. ``logits`` is None for a record without them.
    """

    logits: tuple[float, ...] | None

    def __new__(cls, text: str, logits: tuple[float, ...] | None) -> TextWithLogits:
        made = super().__new__(cls, text)
        made.logits = logits
        return made


def parse_logits(cells: list[str]) -> tuple[float, ...]:
    values = []
    for cell in cells:
        try:
            value = float(str(cell).strip())
        except ValueError:
            raise BadLine(f"teacher logit {str(cell)[:40]!r} is not a number (num_logits: the last columns of a "
                          "record are the teacher's logits, as x-pred distill: true writes them)") from None
        if not math.isfinite(value):
            raise BadLine(f"teacher logit {cell!r} is not a finite number")
        values.append(value)
    return tuple(values)


class WithLogitsLoader:
    """Mixin: split the trailing ``num_logits`` columns off a record, read the rest as the base loader."""

    def logits_width(self, width: int) -> int:
        """How many trailing columns of a record this wide are logits (0 or num_logits)."""
        k, n = self.args.num_logits, self.num_texts  # type: ignore[attr-defined]
        if width in (n + k, n + k + 1) and not (k == 1 and width == n + 1):
            return k
        return 0

    def is_labelled(self, columns: list[str]) -> bool:
        width = len(columns) - self.logits_width(len(columns))
        return self.label_column is not None and width > self.num_texts  # type: ignore[attr-defined]

    def fields(self, columns: list[str], layout: Layout) -> tuple[list[str], str | None]:
        k = self.logits_width(len(columns))
        logits = parse_logits(columns[len(columns) - k:]) if k else None
        own = columns[: len(columns) - k]
        width = None if layout.width is None else layout.width - k
        texts, label = super().fields(own, Layout(layout.labelled, width, layout.line))  # type: ignore[misc]
        return [TextWithLogits(texts[0], logits), *texts[1:]], label


NUM_LOGITS = Option("num_logits", int, default=2, validate=at_least(1),
                    doc="how many trailing columns of a record are the teacher's logits (x-pred with distill: "
                        "true writes one per class, after the record's own columns with concat_origin: true); "
                        "a record with exactly its texts (and label) has none")


@loaders.register("single_with_logits")
class SingleWithLogitsLoader(WithLogitsLoader, SingleLoader):
    """Loader ``single`` whose records may end with the teacher's logits (static distillation)."""

    options = [*SingleLoader.options, NUM_LOGITS]


@loaders.register("pair_with_logits")
class PairWithLogitsLoader(WithLogitsLoader, PairLoader):
    """Loader ``pair`` whose records may end with the teacher's logits (static distillation)."""

    options = [*PairLoader.options, NUM_LOGITS]


class WithLogitsProcessor:
    """Mixin for a processor that stores the teacher's logits (and, with ``keep_texts``, the raw texts) as
    ``extra_fields``: written per sample by x-prepro, read back by the dataset, never part of net_input, and
    absent from the samples ``encode`` makes for x-eval / x-pred / x-serve (a student predicts from text)."""

    text_fields: tuple[str, ...] = ()

    def __init__(self, args: Any, data_dir: str | None = None) -> None:
        super().__init__(args, data_dir)  # type: ignore[call-arg]
        self.extra_fields = (LOGITS_FIELD, *(self.text_fields if args.get("keep_texts") else ()))

    def numerize_batch(self, texts: Any) -> list[tuple[dict[str, Any], bool] | None]:
        import numpy as np  # lazy: x-prepro --dry starts without numpy

        built = super().numerize_batch(texts)  # type: ignore[misc]
        for record, sample in zip(texts, built):
            if sample is None:
                continue
            logits = getattr(record[0], "logits", None)
            sample[0][LOGITS_FIELD] = np.asarray(logits if logits is not None else (), dtype=np.float32)
            if self.args.get("keep_texts"):  # type: ignore[attr-defined]
                for name, text in zip(self.text_fields, record):
                    sample[0][name] = np.frombuffer(str(text).encode("utf-8"), dtype=np.uint8)
        return built

    def collate_targets(self, samples: list[dict[str, Any]]) -> Any:
        """Class ids, IGNORE_INDEX (-100) for a sample without a label (an unlabelled corpus in the
        training splits: its loss is the soft part alone)."""
        import torch  # lazy: torch is heavy; x-prepro (and its --dry) starts without it

        if not samples or not any("target" in s for s in samples):
            return None
        if self.target_type == "regression":  # type: ignore[attr-defined]
            return torch.tensor([s.get("target", float("nan")) for s in samples], dtype=torch.float32)
        return torch.tensor([s.get("target", IGNORE_INDEX) for s in samples], dtype=torch.long)

    def collate(self, samples: list[dict[str, Any]]) -> dict[str, Any]:
        """The batch of the base processor, plus ``teacher_logits`` (float32 ``[B, num_logits]``) when every
        sample has them and ``texts`` (the raw texts, a list per sample) when they were kept."""
        import numpy as np  # lazy: x-prepro --dry starts without numpy
        import torch  # lazy: torch is heavy; x-prepro (and its --dry) starts without it

        batch = super().collate(samples)  # type: ignore[misc]
        rows = [s.get(LOGITS_FIELD) for s in samples]
        if samples and all(r is not None and len(r) for r in rows):
            widths = {len(r) for r in rows}
            if len(widths) != 1:
                raise ValueError(f"teacher logits of different widths in one batch: {sorted(widths)}")
            batch["teacher_logits"] = torch.from_numpy(np.stack([np.asarray(r, dtype=np.float32) for r in rows]))
        if samples and all(self.text_fields[0] in s for s in samples):
            batch["texts"] = [[bytes(np.asarray(s[name])).decode("utf-8") for name in self.text_fields]
                              for s in samples]
        return batch


KEEP_TEXTS = Option("keep_texts", bool, default=False,
                    doc="also store each raw text (UTF-8 bytes) beside its tokens, for an online teacher that "
                        "tokenizes differently from the student (task: distill, teacher: a run whose processor "
                        "differs): the teacher's own processor encodes these texts during training")


def loader_rule(loader: str) -> Rule:
    return Rule(lambda a: a.loader == loader, f"this processor reads the teacher logits that loader {loader} "
                f"splits off each record: set loader: {loader}", keys=("processor", "loader"))


@processors.register("single_with_logits")
class SingleWithLogitsProcessor(WithLogitsProcessor, SingleProcessor):
    """Processor ``single`` plus the teacher's logits (``logits``, float32) and optionally the raw text."""

    field_dtypes = {LOGITS_FIELD: "float32", "text": "uint8"}
    text_fields = ("text",)
    options = [KEEP_TEXTS, loader_rule("single_with_logits")]


@processors.register("pair_with_logits")
class PairWithLogitsProcessor(WithLogitsProcessor, PairProcessor):
    """Processor ``pair`` plus the teacher's logits (``logits``, float32) and optionally the raw texts."""

    field_dtypes = {LOGITS_FIELD: "float32", "text1": "uint8", "text2": "uint8"}
    text_fields = ("text1", "text2")
    options = [KEEP_TEXTS, loader_rule("pair_with_logits")]


@processors.register("bert_single_with_logits")
class BertSingleWithLogitsProcessor(WithLogitsProcessor, BertSingleProcessor):
    """Processor ``bert_single`` plus the teacher's logits (a BERT student, static distillation)."""

    field_dtypes = {LOGITS_FIELD: "float32", "text": "uint8"}
    text_fields = ("text",)
    options = [*BertSingleProcessor.options, KEEP_TEXTS, loader_rule("single_with_logits")]


@processors.register("bert_pair_with_logits")
class BertPairWithLogitsProcessor(WithLogitsProcessor, BertPairProcessor):
    """Processor ``bert_pair`` plus the teacher's logits (a BERT student, static distillation)."""

    field_dtypes = {LOGITS_FIELD: "float32", "text1": "uint8", "text2": "uint8"}
    text_fields = ("text1", "text2")
    options = [*BertPairProcessor.options, KEEP_TEXTS, loader_rule("pair_with_logits")]
