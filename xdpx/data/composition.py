"""Which processor and loader a data config builds. The processor names the input's shape (``single``,
``pair``, ``ner``, ``bi_encoder``; ``bert_lm`` / ``bert_pretrain`` for corpora), the tokenizer is a choice of
its own, and two options add to any shape:

- ``special_tokens``: how a transformer's special tokens frame each sample: ``none`` (the ids alone, for the
  CNN and LSTM encoders), ``bert`` (``[CLS] text [SEP]``, pairs with token types, by ``cls_word`` /
  ``sep_word``) or ``model`` (the tokenizer folder's own template, ``tokenizer: auto``: ``<s> a </s></s> b
  </s>`` for RoBERTa, nothing for Qwen2...). The names of earlier releases stay: ``bert_single`` is
  ``single`` with ``special_tokens: bert``, ``hf_single`` the same with ``model``, ``bert_ner``,
  ``bert_bi_encoder``, ``hf_pair``... (the table below).
- ``teacher_logits``: the records end with a teacher's logits (x-pred ``distill: true``), stored beside the
  tokens for static distillation (``keep_texts`` adds the raw texts for an online teacher). The names
  ``single_with_logits``, ``bert_single_with_logits``... are the same with ``teacher_logits: true``.

Every place that builds a processor or a loader asks :func:`build_processor` / :func:`build_loader`.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from xdpx.config.options import Option, Rule
from xdpx.data import loaders, processors
from xdpx.data.bert_processing import SPECIAL_OPTIONS
from xdpx.data.distill_data import KEEP_TEXTS, LOGITS_FIELD, NUM_LOGITS, WithLogitsLoader, WithLogitsProcessor

# (shape, special_tokens) -> the processor that frames that shape
FRAMED = {("single", "bert"): "bert_single", ("single", "model"): "hf_single",
          ("pair", "bert"): "bert_pair", ("pair", "model"): "hf_pair",
          ("ner", "bert"): "bert_ner", ("ner", "model"): "bert_ner",
          ("bi_encoder", "bert"): "bert_bi_encoder", ("bi_encoder", "model"): "bert_bi_encoder"}
LOGIT_LOADERS = ("single", "pair", "triplet")  # triplet: the bi-encoder's margin_mse


def _framable(args: Any) -> bool:
    return args.get("special_tokens", "none") == "none" or (args.processor, args.special_tokens) in FRAMED


COMPOSITION_OPTIONS = [
    Option("special_tokens", str, default="none", choices=("none", "bert", "model"),
           doc="how special tokens frame each sample of the processors single, pair, ner and bi_encoder: none "
               "(the ids alone: the CNN and LSTM encoders), bert ([CLS] text [SEP] by cls_word / sep_word; pairs "
               "with token types 0 / 1) or model (the template of the tokenizer folder, tokenizer: auto)",
           children={"bert": SPECIAL_OPTIONS, "model": SPECIAL_OPTIONS}),
    Rule(_framable, lambda a: f"special_tokens: {a.special_tokens}: processor {a.processor} "
                              + ("frames its samples itself" if a.processor in FRAMED.values() else "has no framed form")
                              + " (special_tokens frames the processors single, pair, ner and bi_encoder)",
         keys=("special_tokens", "processor")),
    Rule(lambda a: a.get("special_tokens") != "model" or a.get("tokenizer") == "auto",
         "special_tokens: model frames samples by the tokenizer folder's template: set tokenizer: auto and "
         "tokenizer_dir: the model folder", keys=("special_tokens", "tokenizer")),
    Option("teacher_logits", bool, default=False,
           doc="the records end with a teacher's logits (x-pred distill: true, concat_origin: true): stored "
               "beside the tokens for static distillation (task: distill); any processor of one text or a pair, "
               "and the bi-encoder's triplets (loss margin_mse)",
           children={True: [NUM_LOGITS, KEEP_TEXTS,
                            Rule(lambda a: a.loader in LOGIT_LOADERS or a.loader.endswith("_with_logits"),
                                 "teacher_logits: the logits follow the texts of loader single, pair or triplet",
                                 keys=("teacher_logits", "loader"))]}),
]


def processor_class(args: Any) -> type:
    """The class of the config's processor: its shape, framed by ``special_tokens``, with teacher logits."""
    name = FRAMED.get((args.processor, args.get("special_tokens", "none")), args.processor)
    cls = processors.get(name)
    if args.get("teacher_logits") and not issubclass(cls, WithLogitsProcessor):
        cls = _with_logits(cls)
    return cls


@cache
def _with_logits(base: type) -> type:
    texts = ("text",) if base.num_texts == 1 else tuple(f"text{i + 1}" for i in range(base.num_texts))
    dtypes = {**base.field_dtypes, LOGITS_FIELD: "float32", **dict.fromkeys(texts, "uint8")}
    return type(f"{base.__name__}WithLogits", (WithLogitsProcessor, base),
                {"text_fields": texts, "field_dtypes": dtypes, "__doc__": f"{base.__doc__} With teacher logits."})


def build_processor(args: Any, data_dir: str | None = None) -> Any:
    return processor_class(args)(args, data_dir)


def loader_class(args: Any) -> type:
    cls = loaders.get(args.loader)
    if args.get("teacher_logits") and not issubclass(cls, WithLogitsLoader):
        cls = _logit_loader(cls)
    return cls


@cache
def _logit_loader(base: type) -> type:
    return type(f"{base.__name__}WithLogits", (WithLogitsLoader, base), {"__doc__": base.__doc__})


def build_loader(args: Any) -> Any:
    return loader_class(args)(args)
