"""The x-prepro run: check, build vocabulary and target map, encode each split, commit.

Everything is written to a local staging folder first. Each finished split is moved into data_dir
with vocab.txt / target_map.txt, then meta.hjson is rewritten (atomically) to list it, so training with
lazy_load can start on the first shards while later ones are still being written. A failure removes
the staging folder: what data_dir held before stays as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections import Counter
from typing import Any

from xdpx import io
from xdpx.config.errors import ConfigError
from xdpx.config.writers import ARGS_FILE, format_args_py
from xdpx.data import parsers, tokenizers
from xdpx.data.composition import build_loader, processor_class
from xdpx.data.dictionary import Dictionary, write_vocab
from xdpx.data.embeddings import embedding_words, write_embeddings
from xdpx.data.errors import BadLine, too_many_bad_lines
from xdpx.data.indexed import IndexedWriter, ScalarWriter, narrowest_dtype
from xdpx.data.label_spellings import FirstSeen, checked_counts
from xdpx.data.meta import FACT_NAMES, FORMAT_VERSION, processing_values, read_meta, write_meta
from xdpx.data.processing import TARGET_MAP_FILE, VOCAB_FILE
from xdpx.data.reading import WorkerPool, iter_chunks, new_digest
from xdpx.data.show import format_samples
from xdpx.data.splits import resolve_splits
from xdpx.data.targets import TargetMap, rare_labels_warning, without_joined_labels
from xdpx.data.worker import encode_job, init_worker, scan_job
from xdpx.io.credentials import redact

EMBEDDINGS_FILE = "embeddings.npy"
ID_CHUNK = 1 << 20  # sample ids written a million at a time
TOKENIZER_JSON = "tokenizer.json"


class PreproError(Exception):
    """A problem with the inputs or data_dir found before or during the work (shown without traceback)."""


def plan(args: Any) -> tuple[list[tuple[str, list[str]]], dict[str, Any] | None]:
    """Check what can be checked before any work: input files, split names, agreement with data_dir."""
    splits, problems = resolve_splits(args.data_source, args.data_files, exclude=args.data_dir)
    if not splits and not problems:
        problems.append(f"data_files {args.data_files!r} selects no file in {args.data_source}")
    if problems:  # what data_files names is part of the config: exit 2 like any other config error
        where = args.source("data_files")
        raise ConfigError([f"{where}: {p}" for p in problems])
    for split, files in splits:
        empty = [f for f in files if io.size(f) == 0]
        if empty and len(empty) == len(files):
            problems.append(f"{', '.join(empty)}: empty file: split {split!r} would have no samples")
    existing = read_meta(args.data_dir) if io.exists(args.data_dir) else None
    if existing is not None:
        problems += disagreements(args, existing)
    if problems:
        raise PreproError("\n".join(problems))
    return splits, existing


def disagreements(args: Any, existing: dict[str, Any]) -> list[str]:
    """Why the splits already in data_dir could not be used with the ones this config adds."""
    new = processing_values(args)
    old = {k: v for k, v in existing.items() if k not in FACT_NAMES}
    keys = sorted(k for k in set(new) | set(old) if new.get(k) != old.get(k))
    problems = [f"data_dir {args.data_dir} holds splits made with {k}: {old.get(k)!r}, this config has "
                f"{new.get(k)!r}" for k in keys]
    for option, name in (("vocab_file", VOCAB_FILE), ("target_map_file", TARGET_MAP_FILE)):
        given, there = args.get(option), io.join(args.data_dir, name)
        if given and io.exists(there) and _file_hash(given) != _file_hash(there):
            problems.append(f"{option} {given} differs from the {name} of the splits already in {args.data_dir}")
    if problems:
        problems.append("use another data_dir, or remove this one to start over")
    return problems


def _file_hash(path: str) -> str:
    return io.md5(path, progress=False)


class Prepro:
    """One x-prepro run over resolved ``args``."""

    def __init__(self, args: Any) -> None:
        self.args = args
        self.values = {k: v for k, v in args.items()}
        self.parser = parsers.get(args.parser)(args)
        self.loader = build_loader(args)
        self.processor_cls = processor_class(args)
        self.tokenizer_cls = tokenizers.get(args.tokenizer)
        self.log: list[str] = []
        self.summary: dict[str, Counter[str]] = {}

    def say(self, line: str) -> None:
        line = redact(line)  # data_source or data_dir may be a URL with a credential: log.txt shows it masked
        print(line, flush=True)
        self.log.append(line)

    # ---- the run ---------------------------------------------------------------------------------
    def run(self) -> None:
        args = self.args
        splits, existing = plan(args)
        stage_parent = None if io.is_remote(args.data_dir) else os.path.dirname(os.path.abspath(args.data_dir))
        if stage_parent:
            os.makedirs(stage_parent, exist_ok=True)
        stage = tempfile.mkdtemp(prefix=f".{io.basename(args.data_dir.rstrip('/'))}.staging-", dir=stage_parent)
        start = time.time()
        self.say(f"x-prepro: {len(splits)} split(s) from {args.data_source} -> {args.data_dir} "
                 f"(workers: {args.workers})")
        try:
            with WorkerPool(args.workers, init_worker, (self.values, stage)) as self.pool:
                self.process(stage, splits, existing)
            self.say(f"done in {time.time() - start:.1f}s")
            self.write_log()
            shown = next((s for s, _ in splits if s.startswith("train")), splits[0][0])
            for line in format_samples(args.data_dir, shown, 3):
                print(line)
        finally:
            shutil.rmtree(stage, ignore_errors=True)

    def process(self, stage: str, splits: list[tuple[str, list[str]]], existing: dict[str, Any] | None) -> None:
        args = self.args
        self.prepare_vocab_and_targets(stage, splits, existing)
        meta = dict(existing or {})
        meta.update(processing_values(args))
        if args.get("special_targets"):  # metrics read it: class 0 is the negative class
            meta["special_targets"] = list(args.special_targets)
        meta["data_size"] = dict((existing or {}).get("data_size") or {})
        meta["fingerprint"] = dict((existing or {}).get("fingerprint") or {}, options=self.options_hash())
        first_commit = True
        for split, files in splits:
            size, digest = self.encode_split(stage, split, files)
            meta["data_size"][split] = size
            meta["fingerprint"][split] = digest
            self.commit(stage, split, meta, first_commit)
            first_commit = False

    def options_hash(self) -> str:
        text = json.dumps(processing_values(self.args), sort_keys=True, ensure_ascii=False)
        return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()[:16]

    # ---- vocabulary and target map -------------------------------------------------------------------
    def prepare_vocab_and_targets(self, stage: str, splits: list[tuple[str, list[str]]],
                                  existing: dict[str, Any] | None) -> None:
        args = self.args
        vocab_there = io.join(args.data_dir, VOCAB_FILE)
        map_there = io.join(args.data_dir, TARGET_MAP_FILE)
        vocab_path = os.path.join(stage, VOCAB_FILE)
        map_path = os.path.join(stage, TARGET_MAP_FILE)
        reuse = existing is not None  # splits already there: keep their vocabulary and target map
        need_vocab = False
        if self.tokenizer_cls.has_own_vocab:
            tokenizer = self.tokenizer_cls(args, args.get("vocab_file"))
            if args.tokenizer == "auto":
                io.copy(tokenizer.json_path, os.path.join(stage, TOKENIZER_JSON))
            write_vocab(vocab_path, tokenizer.vocab_tokens())  # escaped where a token holds a line break
        elif args.get("vocab_file"):
            io.copy(args.vocab_file, vocab_path)
        elif reuse and io.exists(vocab_there):
            io.copy(vocab_there, vocab_path)
        else:
            need_vocab = True
        need_map = args.target_type != "regression"
        if need_map and args.get("target_map_file"):
            io.copy(args.target_map_file, map_path)
            need_map = False
        elif need_map and reuse and io.exists(map_there):
            io.copy(map_there, map_path)
            need_map = False
        if need_vocab or need_map:
            self.scan(stage, splits, need_vocab, need_map, vocab_path, map_path)
        dictionary = Dictionary.load(vocab_path, args.pad_word, args.unk_word)
        missing = [w for w in self.processor_cls.special_words(args) if w not in dictionary]
        if missing:
            raise PreproError(f"the vocabulary lacks {missing}, which processor {args.processor!r} needs")
        if args.get("pretrained_embeddings"):
            found = write_embeddings(args.pretrained_embeddings, dictionary, os.path.join(stage, EMBEDDINGS_FILE),
                                     args.seed)
            self.say(f"embeddings: {found} of {len(dictionary)} words found in {args.pretrained_embeddings}")

    def scan(self, stage: str, splits: list[tuple[str, list[str]]], need_vocab: bool, need_map: bool,
             vocab_path: str, map_path: str) -> None:
        args = self.args
        # Vocabulary and target map come from the train splits only: a label that only dev or test shows
        # is then a bad line there (file:line), not a class the model never trains on.
        train = [s for s in splits if s[0].startswith("train")] or splits
        token_counts: Counter[str] = Counter()
        label_counts: Counter[str] = Counter()
        first_labels: list[tuple[str, str]] = []
        first_seen: FirstSeen = {}
        for _split, files in train:
            chunks = ((*chunk, need_vocab) for chunk in iter_chunks(
                files, self.parser, self.loader, args.start_line, args.remove_duplicate, new_digest(), Counter()))
            for result in self.pool.map(scan_job, chunks):
                token_counts.update(result.tokens)
                label_counts.update(result.labels)
                first_labels += result.first_labels
                for key, where in result.first_seen.items():
                    first_seen.setdefault(key, where)
        if need_vocab:
            always: set[str] = set()
            if args.get("pretrained_embeddings") and args.ignore_in_emb:
                always = embedding_words(args.pretrained_embeddings)
            dictionary = Dictionary.build(token_counts, args.pad_word, args.unk_word, args.threshold, args.nwords,
                                          always, self.processor_cls.special_words(args))
            dictionary.save(vocab_path)
            self.say(f"vocabulary: {len(dictionary)} tokens built from {sum(token_counts.values())} tokens of "
                     f"{', '.join(s for s, _ in train)}")
        if need_map and label_counts:
            label_counts = self.without_headers(label_counts, first_labels)
            if args.target_type == "multilabel":
                label_counts = without_joined_labels(label_counts, args, self.say)
            label_counts = checked_counts(label_counts, first_seen, args, self.say)  # one label spelt two ways
            try:
                target_map = TargetMap.build(label_counts, args.target_type, args.get("special_targets") or [],
                                             unk=args.get("target_unk"))
            except BadLine as e:
                raise PreproError(str(e)) from None
            target_map.save(map_path)
            self.say(f"target map: {len(target_map)} labels {target_map.labels[:20]}")
            rare = rare_labels_warning(label_counts)
            if rare:
                self.say(rare)

    def without_headers(self, label_counts: Counter[str], first_labels: list[tuple[str, str]]) -> Counter[str]:
        """A label seen once, on the first line of a file, while every other label is seen more often (in
        more than 10 other records), is a header line's column name: an error, or with skip_bad_lines left
        out of the target map (its line is then skipped and counted as bad)."""
        headers = [(where, label) for where, label in first_labels
                   if label_counts[label] == 1 and label not in (self.args.get("special_targets") or [])]
        others = [n for label, n in label_counts.items() if label not in {h for _, h in headers}]
        if not headers or sum(others) <= 10 or min(others) < 2:
            return label_counts
        if not self.args.skip_bad_lines:
            where, label = headers[0]
            raise PreproError(f"{where}: label {label!r} occurs only on this first line: a header line? Set "
                              "start_line: 1 to skip it (or, if it is a real class, list it in target_map_file)")
        for where, label in headers:
            self.say(f"warning: {where}: label {label!r} occurs only on this first line (a header line?): "
                     "skipped as a bad line")
        return Counter({k: v for k, v in label_counts.items() if k not in {label for _, label in headers}})

    # ---- one split -------------------------------------------------------------------------------
    def encode_split(self, stage: str, split: str, files: list[str]) -> tuple[int, str]:
        import numpy as np  # lazy: x-prepro --dry starts without numpy

        args = self.args
        processor = self.processor_cls(args, data_dir=stage)
        dtype = narrowest_dtype(len(processor.dictionary))
        writers = {name: IndexedWriter(os.path.join(stage, f"{split}.{name}"), processor.field_dtypes.get(name, dtype))
                   for name in (*processor.fields, *getattr(processor, "extra_fields", ()))}
        target_writer: ScalarWriter | None = None
        stats: Counter[str] = Counter()
        digest = new_digest()
        chunks = iter_chunks(files, self.parser, self.loader, args.start_line, args.remove_duplicate, digest, stats)
        assembler = processor.assembler(args.break_mode) if processor.is_corpus else None
        count = 0
        for result in self.pool.map(encode_job, chunks):
            stats.update(result.stats)
            if assembler is not None:
                flat, lengths = result.fields["line"]
                offsets = np.concatenate([[0], np.cumsum(lengths)])
                blocks = []
                for i, boundary in enumerate(result.boundaries):
                    blocks += assembler.feed(None if boundary else flat[offsets[i]: offsets[i + 1]])
                samples = self.blocks_to_fields(processor, blocks, stats)
            else:
                samples = result.fields
                if result.targets:
                    if target_writer is None:
                        kind = {"regression": "float32", "multilabel": "uint8"}.get(args.target_type, "int64")
                        width = len(processor.target_map) if args.target_type == "multilabel" else None
                        target_writer = ScalarWriter(os.path.join(stage, f"{split}.target"), kind, width)
                    target_writer.add_many(result.targets)
            for name, (flat, lengths) in samples.items():
                if name not in writers:  # a token-level target field (NER tags): only labelled splits have it
                    writers[name] = IndexedWriter(os.path.join(stage, f"{split}.{name}"),
                                                  processor.field_dtypes.get(name, dtype))
                writers[name].add_many(flat, lengths)
            count += len(next(iter(samples.values()))[1])
        if assembler is not None:
            samples = self.blocks_to_fields(processor, assembler.flush(), stats)
            for name, (flat, lengths) in samples.items():
                writers[name].add_many(flat, lengths)
            count += len(next(iter(samples.values()))[1])
        for writer in writers.values():
            writer.close()
        ids = ScalarWriter(os.path.join(stage, f"{split}.id"), "int64")
        for start in range(0, count, ID_CHUNK):  # in pieces: memory stays flat however large the split
            ids.add_many(np.arange(start, min(count, start + ID_CHUNK)))
        ids.close()
        if target_writer is not None:
            target_writer.close()
            if target_writer.count != count:
                raise PreproError(f"split {split!r} mixes labelled and unlabelled files")
        stats["samples"] = count
        self.summary[split] = stats
        self.report_split(split, files, stats)
        self.check_split(split, files, stats)
        return count, digest.hexdigest()[:16]

    def check_split(self, split: str, files: list[str], stats: Counter[str]) -> None:
        """A split that lost too many lines, or all of them, stops the run before it is committed."""
        names = ", ".join(files)
        if stats["bad_lines"]:
            too_many = too_many_bad_lines(f"split {split!r} ({names})", stats["bad_lines"], stats["lines"],
                                          self.args.max_bad_fraction)
            if too_many:
                raise PreproError(too_many)
        if stats["samples"] == 0:
            raise PreproError(f"split {split!r} ({names}): no samples from {stats['lines']} line(s) (skipped "
                              f"{stats['bad_lines']} bad, {stats['too_short']} shorter than min_len, "
                              f"{stats['duplicates']} duplicates)")

    def blocks_to_fields(self, processor: Any, blocks: list[Any], stats: Counter[str]) -> dict[str, Any]:
        import numpy as np  # lazy: x-prepro --dry starts without numpy

        built = []
        for block in blocks:
            if len(block) < processor.min_len:
                stats["too_short"] += 1
                continue
            built.append(processor.build_sample([block])[0])
        out = {}
        for name in processor.fields:
            arrays = [b[name] for b in built]
            out[name] = (np.concatenate(arrays) if arrays else np.zeros(0, np.int64),
                         np.array([len(a) for a in arrays], dtype=np.int64))
        return out

    def report_split(self, split: str, files: list[str], stats: Counter[str]) -> None:
        samples = stats["samples"]
        share = stats["truncated"] / samples if samples else 0.0
        unk = stats["unk_tokens"] / stats["tokens"] if stats["tokens"] else 0.0
        records = f"{stats['lines']} {self.parser.records_are}"  # a CoNLL record is a sentence of several lines
        self.say(f"{split}: {samples} samples from {records} of {', '.join(io.basename(f) for f in files)}; "
                 f"skipped {stats['bad_lines']} bad, {stats['too_short']} shorter than min_len, "
                 f"{stats['duplicates']} duplicates; {stats['truncated']} truncated to max_len ({share:.2%}); "
                 f"{stats['tokens']} tokens, {unk:.2%} unknown")
        if stats["novel_targets"]:
            self.say(f"{split}: {stats['novel_targets']} sample(s) with a label not in the target map became class "
                     f"{self.args.target_unk!r} (target_unk)")
        if stats["bad_lines"]:
            self.say(f"warning: {split}: skipped {stats['bad_lines']} bad line(s) of {stats['lines']} "
                     f"({stats['bad_lines'] / max(stats['lines'], 1):.2%}; max_bad_fraction "
                     f"{self.args.max_bad_fraction:g}), the first ones:")
        for key in sorted(k for k in stats if k.startswith("mixed: ")):  # loader corpus_mix: units per corpus
            self.say(f"  {key}")
        for key in sorted(k for k in stats if k.startswith("example: "))[:3]:
            self.say(f"  skipped {key[len('example: '):]}")

    # ---- commit ----------------------------------------------------------------------------------
    def commit(self, stage: str, split: str, meta: dict[str, Any], first: bool) -> None:
        args = self.args
        if first:
            meta.update(self.facts_from(stage))
            meta["format_version"] = FORMAT_VERSION
        for name in sorted(os.listdir(stage)):
            if name.startswith(split + ".") and not name.endswith(".part"):
                io.move(os.path.join(stage, name), io.join(args.data_dir, name))
        if first:
            for name in (VOCAB_FILE, TARGET_MAP_FILE, EMBEDDINGS_FILE, TOKENIZER_JSON):
                if os.path.exists(os.path.join(stage, name)):
                    io.copy(os.path.join(stage, name), io.join(args.data_dir, name))

            with io.open(io.join(args.data_dir, ARGS_FILE), "w") as f:
                f.write(format_args_py(args))
        write_meta(args.data_dir, meta)

    def facts_from(self, stage: str) -> dict[str, Any]:
        args = self.args
        dictionary = Dictionary.load(os.path.join(stage, VOCAB_FILE), args.pad_word, args.unk_word)
        facts: dict[str, Any] = {"vocab_size": len(dictionary), "pad_index": dictionary.pad_index,
                                 "unk_index": dictionary.unk_index}
        for key, option in (("cls_index", "cls_word"), ("sep_index", "sep_word"), ("mask_index", "mask_word")):
            if args.get(option):
                facts[key] = dictionary.special_index(args.get(option))
        map_path = os.path.join(stage, TARGET_MAP_FILE)
        if args.target_type == "regression":
            facts["num_classes"] = 1
        elif os.path.exists(map_path):
            facts["num_classes"] = len(TargetMap.load(map_path))
        return facts

    def write_log(self) -> None:
        args = self.args
        if not args.log_file:
            return
        path = io.join(args.data_dir, args.log_file)
        previous = ""
        if io.exists(path):
            with io.open(path) as f:
                previous = f.read()
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with io.open(path, "w") as f:
            f.write(previous + f"# x-prepro run at {stamp}\n" + "\n".join(self.log) + "\n\n")
