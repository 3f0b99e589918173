"""The model names of the original manual and of earlier releases, each an alias of an encoder and a head.

An alias keeps the options it always had (so old configs and run directories resolve as before) and
says what they mean for the parts: ``fixed(args)``. A run of an alias is the model that name always
built: same computation, same state_dict keys for the transformer ones (their checkpoints load as they
are) and ``legacy_keys`` for the others, whose layers moved under ``encoder.``:

| name | encoder | head | fixed |
| --- | --- | --- | --- |
| cls_cnn | cnn | classification | pooling max |
| cls_lstm | lstm | classification | head_hidden_size = hidden_size |
| lstm_ner | lstm | tagging | crf without constraints |
| bi_encoder | cnn | bi_encoder | one kernel of 3, hidden_size filters, projection_size = embedding_size |
| bert_classification, bert_pair | bert | classification | pooling cls = BERT's pooler |
| bert_siamese | bert | siamese | |
| bert_ner | bert | tagging | crf without constraints |
| bert_bi_encoder | bert | bi_encoder | |
| bert_lm | bert | mlm | |
| bert_pretrain | bert | pretrain | |
| hf_classification, hf_pair | hf | classification | |

The taggers' CRF keeps its unconstrained transitions under these names (their runs decode as they did);
``encoder: ..., head: tagging`` constrains them by default.
"""

from __future__ import annotations

from typing import Any

from xdpx.config.options import Option
from xdpx.config.ranges import at_least
from xdpx.models import models
from xdpx.models.bert_options import ARCHITECTURE_OPTIONS, HEAD_OPTIONS, PRETRAINED_OPTIONS, SIAMESE_OPTIONS
from xdpx.models.composed import compose
from xdpx.models.encoders.cnn import CNNEncoder
from xdpx.models.encoders.hf import HF_OPTIONS, default_pooling
from xdpx.models.encoders.lstm import LSTMEncoder
from xdpx.models.heads.bi_encoder import NORMALIZE
from xdpx.models.heads.classification import CLASSIFIER_DROPOUT
from xdpx.models.heads.tagging import CRF_OPTION
from xdpx.models.layer_groups import LAYER_OPTIONS
from xdpx.models.lora import LORA_OPTIONS
from xdpx.models.modules.base import EMBEDDING_OPTIONS
from xdpx.models.students import STUDENT_OPTIONS

BERT = [*ARCHITECTURE_OPTIONS, *PRETRAINED_OPTIONS, *STUDENT_OPTIONS, *LAYER_OPTIONS, *LORA_OPTIONS]


class Alias:
    """A registered model name that builds ``encoder`` + ``head``."""

    encoder = ""
    head = ""
    options: list[Any] = []
    legacy_keys: dict[str, str] = {}

    @classmethod
    def fixed(cls, args: Any) -> dict[str, Any]:
        """Option values of the parts that this name fixes (from its own options)."""
        return {}

    @classmethod
    def build(cls, args: Any) -> Any:
        return compose(args, cls.encoder, cls.head, cls.fixed(args), cls.legacy_keys)


def alias(name: str, encoder: str, head: str, options: list[Any], doc: str,
          fixed: Any = None, legacy_keys: dict[str, str] | None = None) -> type[Alias]:
    """Register ``name`` as an alias of ``encoder`` + ``head`` with its own ``options``."""
    namespace = {"encoder": encoder, "head": head, "options": options, "legacy_keys": dict(legacy_keys or {}),
                 "__doc__": doc}
    if fixed is not None:
        namespace["fixed"] = classmethod(lambda cls, args: fixed(args))
    return models.register(name)(type(name, (Alias,), namespace))


def without(options: list[Any], *names: str) -> list[Any]:
    return [o for o in options if not (isinstance(o, Option) and o.name in names)]


# ---- the non-transformer models --------------------------------------------------------------------
alias("cls_cnn", "cnn", "classification", without(CNNEncoder.options, "pooling"),
      "TextCNN (Kim, 2014) for single-text classification or regression: max over time, dropout, linear.",
      fixed=lambda a: {"pooling": "max"},
      legacy_keys={"embedding.": "encoder.embedding.", "convs.": "encoder.convs.", "out.": "classifier."})

alias("cls_lstm", "lstm", "classification", list(LSTMEncoder.options),
      "BiLSTM with max / mean / attention pooling, then a 2-layer head (hidden_size wide).",
      fixed=lambda a: {"head_hidden_size": a.hidden_size},
      legacy_keys={"embedding.": "encoder.embedding.", "lstm.": "encoder.lstm.", "pooling.": "encoder.pooling.",
                   "head.hidden.linear.": "dense.", "head.out.": "classifier."})

alias("lstm_ner", "lstm", "tagging", [*without(LSTMEncoder.options, "pooling"), CRF_OPTION],
      "BiLSTM tagger (Lample et al., 2016) over the ner processor's units, optional CRF.",
      fixed=lambda a: {"pooling": "max", "crf_constraints": False},
      legacy_keys={"embedding.": "encoder.embedding.", "lstm.": "encoder.lstm."})

alias("bi_encoder", "cnn", "bi_encoder", [
    *EMBEDDING_OPTIONS,
    Option("hidden_size", int, default=256, validate=at_least(1), doc="convolution channels"),
    Option("embedding_size", int, default=256, validate=at_least(1), doc="width of the text embeddings"),
    Option("pooling", str, default="max", choices=("max", "mean"),
           doc="how the convolution's token states become one vector (over real tokens)"),
    NORMALIZE],
    "A fast bi-encoder trained from scratch: embeddings, one convolution (kernel 3), pooling, a projection.",
    fixed=lambda a: {"kernel_sizes": [3], "num_filters": a.hidden_size, "projection_size": a.embedding_size},
    legacy_keys={"embedding.": "encoder.embedding.", "conv.": "encoder.convs.0."})


# ---- our BERT ---------------------------------------------------------------------------------------
def _pooler(a: Any) -> dict[str, Any]:  # the old name 'cls' of these two meant BERT's pooler over [CLS]
    return {"pooling": "pooler" if a.pooling == "cls" else a.pooling, "add_pooler": True}


alias("bert_classification", "bert", "classification", [*BERT, *HEAD_OPTIONS],
      "BERT over one text ([CLS] text [SEP], processor bert_single): class logits or one regression score.",
      fixed=_pooler)
alias("bert_pair", "bert", "classification", [*BERT, *HEAD_OPTIONS],
      "Cross-encoder over [CLS] a [SEP] b [SEP] (processor bert_pair): matching classes, or STS regression.",
      fixed=_pooler)
alias("bert_siamese", "bert", "siamese", [*BERT, *SIAMESE_OPTIONS],
      "Two towers of one BERT over the bert_pair processor's fields, classified from [u, v, |u - v|, u * v].",
      fixed=_pooler)
alias("bert_ner", "bert", "tagging", [*BERT, CLASSIFIER_DROPOUT, CRF_OPTION],
      "BERT with a tag layer over every token (BertForTokenClassification's keys), optional CRF.",
      fixed=lambda a: {"pooling": "cls", "crf_constraints": False})
alias("bert_bi_encoder", "bert", "bi_encoder", [
    *BERT,
    Option("pooling", str, default="mean", choices=("mean", "cls"),
           doc="the text vector: mean of the last layer over real tokens (sentence-transformers' choice, "
               "all-MiniLM-L6-v2's) or the last layer at [CLS] (DPR's)"),
    NORMALIZE],
    "BERT as the shared encoder of a bi-encoder (processor bert_bi_encoder).")
alias("bert_lm", "bert", "mlm", list(BERT),
      "Masked-language model (processor bert_lm, loss mlm); keys of transformers' BertForMaskedLM.",
      fixed=lambda a: {"pooling": "cls"})
alias("bert_pretrain", "bert", "pretrain", list(BERT),
      "MLM plus sentence-order prediction (processor bert_pretrain, loss mlm_sop); BertForPreTraining's keys.",
      fixed=lambda a: {"pooling": "cls"})


# ---- the transformers family ------------------------------------------------------------------------
HF_POOLING = Option("pooling", str, choices=("cls", "mean", "pooler", "last"), default=default_pooling,
                    default_doc="last for decoder-only models, pooler for BERT and ALBERT checkpoints (their "
                                "pooler was pretrained), else cls",
                    doc="the text vector: cls (the first token's last hidden state: [CLS] / <s>), mean (the mean "
                        "of the last layer over real tokens), pooler (the model's own pooler over the first "
                        "token; BERT, ALBERT, RoBERTa, XLM-R have one) or last (the last real token's state)")
alias("hf_classification", "hf", "classification", [*HF_OPTIONS, HF_POOLING, CLASSIFIER_DROPOUT],
      "A transformers encoder over one text (processor hf_single): class logits or one regression score.")
alias("hf_pair", "hf", "classification", [*HF_OPTIONS, HF_POOLING, CLASSIFIER_DROPOUT],
      "A transformers cross-encoder over a pair in one sequence (processor hf_pair).")
