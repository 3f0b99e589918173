"""Raw records -> samples with the run's own parser, loader, tokenizer, vocabulary and processor.

The processor is the one x-prepro used (``numerize_batch``, on which ``processor.encode`` is built), so a
text is tokenized for prediction exactly as it was for training. Chunks can be encoded in ``workers``
processes (xdpx.data.reading.WorkerPool: in order, bounded memory); a malformed record stops the run
with ``file:line`` unless ``skip_bad_lines``.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xdpx.config.options import Args
from xdpx.data import parsers
from xdpx.data.composition import build_loader, build_processor, processor_class
from xdpx.data.errors import BadLine, count_skipped, decode_utf8, too_many_bad_lines
from xdpx.data.reading import WorkerPool
from xdpx.data.targets import NovelTarget
from xdpx.errors import UserError

_ENCODER: RecordEncoder | None = None  # this process's encoder (set by init_encoder)


@dataclass
class Encoded:
    """The samples of one chunk with their record numbers and the records' columns."""

    samples: list[dict[str, Any]]
    numbers: list[int]
    columns: list[list[str]]
    labelled: bool
    stats: Counter[str] = field(default_factory=Counter)


class RecordEncoder:
    """Parser, loader and processor of a run, built from plain option values (picklable for workers)."""

    def __init__(self, values: dict[str, Any], data_dir: str, skip_bad_lines: bool) -> None:
        args = Args(values, {}, set(), {})
        self.parser = parsers.get(args.parser)(args)
        self.loader = build_loader(args)
        self.processor = build_processor(args, data_dir=data_dir)
        self.skip_bad = skip_bad_lines
        self.ignore_novel = bool(values.get("ignore_novel_target"))  # x-eval: skip labels not in the target map

    def encode(self, chunk: tuple[str, Any, list[tuple[int, Any]]]) -> Encoded:
        where, layout, records = chunk
        stats: Counter[str] = Counter(lines=len(records))
        rows = []
        for number, raw in records:
            try:
                raw = decode_utf8(raw)
                columns = raw if isinstance(raw, list) else self.parser.parse(raw)
                texts, label = self.loader.fields(columns, layout)
            except BadLine as e:
                self._bad(e.located(f"{where}:{number}", raw if isinstance(raw, (str, bytes)) else "\t".join(raw)),
                          stats)
                continue
            rows.append((number, columns, texts, label))
        built = self.processor.numerize_batch([texts for _, _, texts, _ in rows])
        out = Encoded([], [], [], layout.labelled, stats)
        for (number, columns, texts, label), sample in zip(rows, built):
            if sample is None:
                self._bad(BadLine(f"a text shorter than min_len {self.processor.min_len} tokens",
                                  f"{where}:{number}", " | ".join(texts)), stats)
                continue
            fields, truncated = sample
            fields["id"] = number
            if label is not None:
                try:
                    target_field = getattr(self.processor, "target_field", None)  # NER tags: a token field
                    if target_field:
                        fields[target_field] = self.processor.field_target(fields, label)
                    else:
                        fields["target"] = self.processor.target_of(label)
                except NovelTarget as e:
                    if not self.ignore_novel:
                        self._bad(e.located(f"{where}:{number}", label), stats)
                    stats["novel_targets"] += int(self.ignore_novel)
                    continue
                except BadLine as e:
                    self._bad(e.located(f"{where}:{number}", label), stats)
                    continue
            stats["truncated"] += int(truncated)
            out.samples.append(fields)
            out.numbers.append(number)
            out.columns.append(columns)
        return out

    def _bad(self, error: BadLine, stats: Counter[str]) -> None:
        if not self.skip_bad:
            raise error
        count_skipped(error, stats)


def init_encoder(values: dict[str, Any], data_dir: str, skip_bad_lines: bool, in_process: bool) -> None:
    global _ENCODER
    if not in_process:  # one process per core already

        os.environ["RAYON_NUM_THREADS"] = "1"
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
    _ENCODER = RecordEncoder(values, data_dir, skip_bad_lines)


def encode_chunk(chunk: tuple[str, bool, list[tuple[int, Any]]]) -> Encoded:
    assert _ENCODER is not None, "init_encoder was not called in this process"
    return _ENCODER.encode(chunk)


def encode_source(source: Any, run_args: Any, data_dir: str, workers: int | None, skip_bad_lines: bool,
                  limit: int | None = None, max_bad_fraction: float = 0.0,
                  ignore_novel_target: bool = False) -> Iterator[Encoded]:
    """The encoded chunks of a raw source, in order; at most ``limit`` samples in all. An input without
    records, or with more than ``max_bad_fraction`` of its lines bad, is a UserError after its last chunk
    (so a caller writing as chunks arrive discards what it wrote). ``ignore_novel_target``: a record whose
    label is not in the target map is skipped and counted (``stats["novel_targets"]``), not a bad line."""
    if processor_class(run_args).is_corpus:
        raise UserError(f"processor {run_args.processor!r} builds samples from a running corpus: evaluate a "
                        "split of data_dir instead of a raw file")
    values = {**run_args.as_dict(), "ignore_novel_target": ignore_novel_target}
    parser, loader = parsers.get(run_args.parser)(run_args), build_loader(run_args)
    done = 0
    seen: Counter[str] = Counter()
    with WorkerPool(workers or 1, init_encoder, (values, data_dir, skip_bad_lines)) as pool:
        try:
            for encoded in pool.map(encode_chunk, source.chunks(parser, loader)):
                seen.update(lines=encoded.stats["lines"], bad_lines=encoded.stats["bad_lines"])
                if limit is not None and done + len(encoded.samples) >= limit:
                    keep = limit - done
                    encoded.samples, encoded.numbers = encoded.samples[:keep], encoded.numbers[:keep]
                    encoded.columns = encoded.columns[:keep]
                    _check_counts(source.name, seen, max_bad_fraction)
                    yield encoded
                    return
                done += len(encoded.samples)
                yield encoded
        except BadLine as e:
            raise UserError(f"{e}\n(set skip_bad_lines: true to skip such lines)") from None
    _check_counts(source.name, seen, max_bad_fraction)


def _check_counts(name: str, seen: Counter[str], max_bad_fraction: float) -> None:

    if seen["lines"] == 0:
        raise UserError(f"{name}: no records (an empty file or table)")
    too_many = too_many_bad_lines(name, seen["bad_lines"], seen["lines"], max_bad_fraction)
    if too_many:
        raise UserError(too_many)


class SampleList:
    """Encoded samples as a dataset: ``len``, ``[i]``, ``sizes`` (what evaluation and batching need)."""

    def __init__(self, samples: list[dict[str, Any]], fields: tuple[str, ...]) -> None:
        self.samples = samples
        self.sizes = np.array([sum(len(s[f]) for f in fields) for s in samples], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.samples[i]
