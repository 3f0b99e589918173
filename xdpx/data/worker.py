"""The work on one chunk of input records, done in worker processes (or in-process for workers: 1).

A chunk is (file, layout, [(line number, raw record)...]); results come back in submission order,
so the output is the same for any number of workers. Each process builds its components once
(:func:`init_worker`); jobs then only carry data.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from xdpx.config.options import Args
from xdpx.data import parsers, tokenizers
from xdpx.data.composition import build_loader, build_processor
from xdpx.data.errors import BadLine, count_skipped, decode_utf8
from xdpx.data.loading import Layout
from xdpx.data.parsing import JsonValue
from xdpx.data.targets import label_names

_STATE: ChunkWorker | None = None  # this process's worker (one per process; set by init_worker)


@dataclass
class ScanResult:
    tokens: Counter[str] = field(default_factory=Counter)
    labels: Counter[str] = field(default_factory=Counter)
    # (file:line, label) of a file's first record: a label seen only there is likely a header line.
    first_labels: list[tuple[str, str]] = field(default_factory=list)
    # (label name, "" or the JSON kind it was written as) -> its first file:line (xdpx/data/label_spellings.py)
    first_seen: dict[tuple[str, str], str] = field(default_factory=dict)


@dataclass
class EncodeResult:
    """Token fields as (flat ids, lengths), one target per sample, and counts for log.txt."""

    fields: dict[str, tuple[Any, Any]]
    targets: list[Any]
    lines: list[int]
    boundaries: list[bool] = field(default_factory=list)  # corpus: True where a line ends a document
    stats: Counter[str] = field(default_factory=Counter)


class ChunkWorker:
    """Parser and loader, plus the tokenizer (scan jobs) or the processor (encode jobs), built once
    per process from plain option values; the processor reads the staged vocab.txt when first needed."""

    def __init__(self, values: dict[str, Any], stage_dir: str | None) -> None:
        args = Args(values, {}, set(), {})
        self.args, self.stage_dir = args, stage_dir
        self.parser = parsers.get(args.parser)(args)
        self.loader = build_loader(args)
        self.skip_bad = bool(args.skip_bad_lines)
        self._tokenizer: Any = None
        self._processor: Any = None

    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            self._tokenizer = tokenizers.get(self.args.tokenizer)(self.args, self.args.get("vocab_file"))
        return self._tokenizer

    @property
    def processor(self) -> Any:
        if self._processor is None:
            self._processor = build_processor(self.args, data_dir=self.stage_dir)
        return self._processor

    def records(self, job: tuple[str, Layout, list[tuple[int, Any]]], stats: Counter[str]) -> list[tuple[int, list[str], str | None]]:
        path, layout, raw_records = job
        out = []
        for number, raw in raw_records:
            try:
                raw = decode_utf8(raw)
                texts, label = self.loader.fields(self.parser.parse(raw), layout)
            except BadLine as e:
                located = e.located(f"{path}:{number}", raw)
                if not self.skip_bad:
                    raise located from None
                count_skipped(located, stats)
                continue
            out.append((number, texts, label))
        return out

    def scan(self, job: Any, count_tokens: bool) -> ScanResult:
        result = ScanResult()
        records = self.records(job, Counter())
        if count_tokens:
            for tokens in self.tokenizer.tokenize_batch([t for _, texts, _ in records for t in texts if t]):
                result.tokens.update(tokens)
        for number, _, label in records:
            if label is None:
                continue
            names = label_names(label, self.args)
            result.labels.update(names)
            kind = label.kind if isinstance(label, JsonValue) and label.kind != "list" else ""
            for name in names:
                result.first_seen.setdefault((name, kind), f"{job[0]}:{number}")
        first_line = job[1].line
        result.first_labels = [(f"{job[0]}:{number}", label) for number, _, label in records
                               if number == first_line and label is not None]
        return result

    def encode(self, job: Any) -> EncodeResult:
        import numpy as np  # lazy: x-prepro --dry starts without numpy

        stats: Counter[str] = Counter()
        records = self.records(job, stats)
        processor = self.processor
        if processor.is_corpus:
            ids = processor.ids_batch([texts[0] for _, texts, _ in records])
            lengths = np.array([len(x) for x in ids], dtype=np.int64)
            flat = np.concatenate(ids) if ids else np.zeros(0, np.int64)
            stats["tokens"] += int(lengths.sum())
            stats["unk_tokens"] += int((flat == processor.dictionary.unk_index).sum())
            return EncodeResult({"line": (flat, lengths)}, [], [n for n, _, _ in records],
                                [not texts[0] for _, texts, _ in records], stats)
        samples = processor.numerize_batch([texts for _, texts, _ in records])
        kept, targets, lines = [], [], []
        for (number, _texts, label), built in zip(records, samples):
            if built is None:
                stats["too_short"] += 1
                continue
            sample, truncated = built
            if label is not None:
                try:
                    if getattr(processor, "target_field", None):  # token-level targets (NER tags): a field
                        sample[processor.target_field] = processor.field_target(sample, label)
                    else:
                        targets.append(processor.target_of(label))
                    stats["novel_targets"] += processor.target_map is not None and any(
                        processor.target_map.is_novel(name) for name in label_names(label, self.args))
                except BadLine as e:
                    located = e.located(f"{job[0]}:{number}", label)
                    if not self.skip_bad:
                        raise located from None
                    count_skipped(located, stats)
                    continue
            stats["truncated"] += truncated
            kept.append(sample)
            lines.append(number)
        fields = {}
        target_field = getattr(processor, "target_field", None)
        labelled = (target_field,) if target_field and kept and target_field in kept[0] else ()
        # extra fields are stored, not net_input
        for name in (*processor.fields, *getattr(processor, "extra_fields", ()), *labelled):
            arrays = [s[name] for s in kept]
            fields[name] = (np.concatenate(arrays) if arrays else np.zeros(0, np.int64),
                            np.array([len(a) for a in arrays], dtype=np.int64))
        first = fields[processor.fields[0]][0]
        stats["tokens"] += int(sum(len(fields[f][0]) for f in processor.fields if f != "token_type_ids"))
        stats["unk_tokens"] += int((first == processor.dictionary.unk_index).sum())
        return EncodeResult(fields, targets, lines, [], stats)


def init_worker(values: dict[str, Any], stage_dir: str | None, in_process: bool) -> None:
    global _STATE
    if not in_process:
        # One process per core already: the tokenizers library must not start threads of its own.
        os.environ["RAYON_NUM_THREADS"] = "1"
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
    _STATE = ChunkWorker(values, stage_dir)


def scan_job(job: Any) -> ScanResult:
    """Count labels (and, for ``job[3]`` true, tokens) of a chunk ``(file, layout, records, count_tokens)``."""
    assert _STATE is not None, "init_worker was not called in this process"
    return _STATE.scan(job[:3], job[3])


def encode_job(job: Any) -> EncodeResult:
    assert _STATE is not None, "init_worker was not called in this process"
    return _STATE.encode(job)
