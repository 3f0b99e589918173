"""x-prepro: raw text -> memory-mapped splits, vocab.txt, target_map.txt and meta.hjson (docs/prepro.md).

    x-prepro prepro.hjson          # run
    x-prepro prepro.hjson --dry    # check options and input paths, print the splits it would write
"""

from __future__ import annotations

from typing import Any

from xdpx.command import Command, commands
from xdpx.config.options import Args, Option, Rule
from xdpx.config.ranges import at_least, exactly
from xdpx.data import loaders, processors, tokenizers
from xdpx.data.composition import processor_class
from xdpx.data.errors import MAX_BAD_FRACTION, BadLine
from xdpx.data.label_spellings import ALLOW_LABEL_VARIANTS
from xdpx.data.meta import PROCESSING_OPTIONS
from xdpx.data.splits import same_folder
from xdpx.data.tokenizing import tokenizer_dir_problem
from xdpx.errors import UserError
from xdpx.io import writer_lock
from xdpx.io.credentials import redact


def _component(registry_name: str, name: str) -> Any:
    registry = {"processor": processors, "loader": loaders, "tokenizer": tokenizers}[registry_name]
    return registry.get(name) if name in registry else None


def _processor(args: Any) -> Any:
    """The processor class the options build (special_tokens frames a shape), None for an unknown name."""
    return processor_class(args) if args.processor in processors else None


def _corpus_fits(args: Any) -> bool:
    loader, processor = _component("loader", args.loader), _processor(args)
    return loader is None or processor is None or loader.is_corpus == processor.is_corpus


def _texts_fit(args: Any) -> bool:
    loader, processor = _component("loader", args.loader), _processor(args)
    if loader is None or processor is None or processor.is_corpus:
        return True
    # a processor may take several layouts (the bi-encoders: pairs, or triplets with a hard negative)
    return len(loader.text_keys) in getattr(processor, "text_counts", (processor.num_texts,))


VOCAB_BUILD_OPTIONS = [
    Option("threshold", int, default=-1, validate=at_least(-1),
           doc="words seen more than this many times join the vocabulary"),
    Option("ignore_in_emb", bool, default=True,
           doc="words of pretrained_embeddings join the vocabulary whatever their count"),
    Option("nwords", int, default=-1, validate=exactly(-1) | at_least(0),
           doc="at most this many words besides the special ones; -1: no limit"),
]

TARGET_MAP_OPTIONS = [
    Option("special_targets", list[str], default=[],
           doc="labels always placed first in the target map, e.g. the negative class for multi-class F1"),
    ALLOW_LABEL_VARIANTS,
]

PREPRO_OPTIONS = [
    Option("data_source", str, path="input", doc="the folder holding the raw data files"),
    Option("data_files", str | list[str] | dict[str, str], default="*.txt",
           doc="files under data_source: a glob, a list of paths/globs (split = file name without extension), "
               "or a mapping {relative path: split name}"),
    Option("data_dir", str, path="output", doc="where the processed data goes"),
    Option("vocab_file", str, default=None, path="input", children={None: VOCAB_BUILD_OPTIONS}, aliases=("vocab",),
           doc="a predefined vocabulary (one token per line; the BERT vocab.txt for tokenizer: bert); "
               "null: built from the train splits"),
    Option("target_map_file", str, default=None, path="input", children={None: TARGET_MAP_OPTIONS}, aliases=("target_map",),
           doc="a predefined target map (one label per line); null: built from the labels of the data"),
    Option("pretrained_embeddings", str, default=None, path="input",
           doc="word vectors in text format; writes data_dir/embeddings.npy in vocabulary order"),
    Option("log_file", str, default="log.txt", doc="log file name under data_dir; null: no log"),
    Option("workers", int, default=1, validate=at_least(1),
           doc="processes for tokenizing; the output is the same for any number"),
    Option("seed", int, default=1, validate=at_least(0),
           doc="seed for the initialization of embeddings missing from pretrained_embeddings"),
    *PROCESSING_OPTIONS,
    Option("remove_duplicate", bool, default=False, doc="drop repeated lines within a split"),
    Option("skip_bad_lines", bool, default=False, children={True: [MAX_BAD_FRACTION]},
           doc="skip malformed lines (counted in log.txt) instead of stopping with file:line"),
    Option("start_line", int, default=0, validate=at_least(0),
           doc="skip this many lines at the start of every file (e.g. 1 for a header)"),
    Rule(lambda a: not same_folder(a.data_dir, a.data_source),
         "data_dir is data_source: x-prepro would write its outputs (vocab.txt, log.txt...) among the raw files, "
         "read them back as splits on the next run and could overwrite a raw file of the same name; choose "
         "another data_dir", keys=("data_dir", "data_source")),
    Rule(_corpus_fits, "loader 'corpus' goes with processor 'bert_lm' (and bert_lm needs loader 'corpus')",
         keys=("loader", "processor")),
    Rule(_texts_fit, "the loader and the processor disagree on the number of texts (single / pair)",
         keys=("loader", "processor")),
    Rule(lambda a: a.tokenizer != "bert" or a.vocab_file, "tokenizer 'bert' needs vocab_file (the model's vocab.txt)",
         keys=("tokenizer", "vocab_file")),
    Rule(lambda a: a.tokenizer != "auto" or a.tokenizer_dir, "tokenizer 'auto' needs tokenizer_dir",
         keys=("tokenizer",)),
    Rule(lambda a: tokenizer_dir_problem(a) is None, tokenizer_dir_problem, keys=("tokenizer_dir",)),
]


@commands.register("x-prepro")
class PreproCommand(Command):
    """Turn raw text into the binary splits, vocabulary, target map and meta.hjson that x-train uses."""

    name = "x-prepro"
    example = "x-prepro examples/prepro/reviews_char.hjson"
    group = "prepro"
    output_key = "data_dir"

    def options(self) -> list[Any]:
        return list(PREPRO_OPTIONS)

    def run(self, args: Args, dry: bool = False) -> None:
        # lazy: the pipeline and its workers only when x-prepro runs; x-train --help loads this command
        from xdpx.data.pipeline import Prepro, PreproError, plan

        # one writer per data_dir: a second x-prepro (or the same one run twice) is refused, naming the first
        where = f"{args.source('data_dir')}: key 'data_dir': x-prepro refuses to write {redact(args.data_dir)!r}"
        try:
            if dry:
                writer_lock.refuse_if_held(args.data_dir, where)
                splits, existing = plan(args)
                for split, files in splits:
                    print(redact(f"# split {split}: {', '.join(files)}"))  # remote paths: credentials masked
                if existing:
                    print(f"# {redact(args.data_dir)} already holds {sorted(existing.get('data_size') or {})}: kept")
                return
            writer_lock.hold(args.data_dir, "x-prepro", where)  # released when the run ends (chain.py)
            Prepro(args).run()
        except (PreproError, BadLine) as e:
            raise UserError(str(e)) from None
