"""meta.hjson: what x-train, x-eval and x-pred inherit from x-prepro (``__parent__: ${data_dir}/meta``).

Every key is a declared option: :data:`META_OPTIONS` lists them. The processing options (processor,
tokenizer, loader, parser, with the options each switches on) rebuild the very same processor at
training and inference time; the facts (vocab_size, num_classes, data_size...) describe the data.
"""

from __future__ import annotations

from typing import Any

import hjson

from xdpx import io
from xdpx.config.options import Option, Rule, walk_options
from xdpx.config.ranges import at_least
from xdpx.data import loaders, parsers, processors, tokenizers
from xdpx.data.composition import COMPOSITION_OPTIONS
from xdpx.data.hf_tokens import special_token_default
from xdpx.io.credentials import redact

META_FILE = "meta.hjson"
FORMAT_VERSION = 1
TARGET_TYPES = ("text", "index", "regression", "multilabel")

PROCESSING_OPTIONS = [
    Option("processor", str, registry=processors,
           doc="the input's shape, which turns tokens into the stored fields and batches them: single, pair, ner, "
               "bi_encoder (framed for transformers by special_tokens), bert_lm, bert_pretrain (corpora); the "
               "earlier names bert_single, bert_pair, hf_single, hf_pair, bert_ner, bert_bi_encoder and "
               "*_with_logits are these with special_tokens and teacher_logits set"),
    Option("tokenizer", str, registry=tokenizers, doc="space, char_zh, bert, jieba, auto"),
    Option("loader", str, registry=loaders, doc="which columns are texts and label: single, pair, corpus"),
    Option("parser", str, default="csv", registry=parsers,
           doc="how a line splits into columns: csv, tsv, jsonl, json, lines; or the rows of a table: parquet, "
               "excel, arrow (a datasets save_to_disk folder)"),
    Option("max_len", int, validate=at_least(1),
           doc="longest sample in tokens (BERT processors count [CLS]/[SEP]); longer ones are truncated"),
    Option("min_len", int, default=1, validate=at_least(0),
           doc="samples with a text of fewer tokens are dropped (counted in log.txt)"),
    Option("pad_word", str, default=special_token_default("pad_token", "[PAD]"), doc="the padding token",
           default_doc="'[PAD]' (with tokenizer: auto, the pad token of tokenizer_dir's tokenizer_config.json)"),
    Option("unk_word", str, default=special_token_default("unk_token", "[UNK]"),
           default_doc="'[UNK]' (with tokenizer: auto, the unknown token of tokenizer_dir's tokenizer_config.json)",
           doc="the token of words missing from the vocabulary"),
    Option("lower", bool, default=True, doc="lowercase the input"),
    Option("target_type", str, default="text", choices=TARGET_TYPES,
           doc="text: labels are names, the built target map sorts them by frequency; index: labels are "
               "class numbers 0..n-1, sorted by number; regression: labels are numbers (e.g. STS-B scores), "
               "stored as floats, no target map; multilabel: a sample has a set of label names (a label column "
               "joined by label_separator, or a JSON list), stored as a multi-hot row over the target map",
           children={"multilabel": [Option("label_separator", str, default="|", validate=lambda v: bool(v),
                                           validate_msg="must be a non-empty string",
                                           doc="(multilabel) what separates the labels of a sample in the label "
                                               "column, e.g. '|' for 'acq|earn' or ',' (a JSON list label needs "
                                               "none); an empty label column is a sample with no label")]}),
    Option("target_unk", str, default=None,
           doc="a class for labels missing from the target map (e.g. 'other'): they are encoded as this class, "
               "counted in x-prepro's log, instead of stopping as bad lines; added at the end of a target map "
               "built from the data, and must be a line of a given target_map_file. null: such labels are errors"),
    Rule(lambda a: a.min_len <= a.max_len, "min_len is larger than max_len: every sample would be dropped",
         keys=("min_len", "max_len")),
    *COMPOSITION_OPTIONS,  # special_tokens, teacher_logits: on any processor (xdpx/data/composition.py)
]

FACT_OPTIONS = [
    Option("vocab_size", int, default=None, validate=at_least(1),
           doc="(data fact, written by x-prepro) number of tokens in vocab.txt"),
    Option("pad_index", int, default=None, validate=at_least(0), doc="(data fact) id of pad_word"),
    Option("unk_index", int, default=None, validate=at_least(0), doc="(data fact) id of unk_word"),
    Option("cls_index", int, default=None, validate=at_least(0),
           doc="(data fact) id of [CLS] for BERT processors"),
    Option("sep_index", int, default=None, validate=at_least(0),
           doc="(data fact) id of [SEP] for BERT processors"),
    Option("mask_index", int, default=None, validate=at_least(0), doc="(data fact) id of [MASK] for bert_lm"),
    Option("num_classes", int, default=None, validate=at_least(1),
           doc="(data fact) classes in target_map.txt; 1 for regression; null for unlabelled data"),
    Option("special_targets", list[str], default=None,
           doc="(data fact) the special_targets x-prepro put first in the target map; class 0 is then the "
               "negative class, left out of macro and micro averages"),
    Option("data_size", dict[str, int], default=None, validate=at_least(0),
           doc="(data fact) samples per split"),
    Option("format_version", int, default=None, validate=at_least(1),
           doc="(data fact) version of the binary format"),
    Option("fingerprint", dict[str, str], default=None,
           doc="(data fact) hashes of the processing options ('options') and of each split's input files"),
]

META_OPTIONS = PROCESSING_OPTIONS + FACT_OPTIONS
FACT_NAMES = tuple(o.name for o in FACT_OPTIONS)


def processing_values(args: Any) -> dict[str, Any]:
    """The processing options of ``args`` with those of the chosen components, in declaration order."""
    values = args.as_dict() if hasattr(args, "as_dict") else dict(args)
    return {option.name: values[option.name]
            for option, _group in walk_options(PROCESSING_OPTIONS, "data", values) if option.name in values}


def read_meta(data_dir: str) -> dict[str, Any] | None:
    path = io.join(data_dir, META_FILE)
    if not io.exists(path):
        return None
    with io.open(path) as f:
        return dict(hjson.loads(f.read()))


def write_meta(data_dir: str, values: dict[str, Any]) -> None:
    with io.open(io.join(data_dir, META_FILE), "w") as f:  # atomic: readers see the old or the new
        masked = {name: redact(value) for name, value in values.items()}  # a credential in an option: masked
        f.write(hjson.dumps(masked, indent=2, ensure_ascii=False) + "\n")
