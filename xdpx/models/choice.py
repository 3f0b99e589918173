"""Which model a config chooses: ``model: <name>`` (an alias of an encoder and a head, or a whole
pair-interaction model) or ``encoder: <family>`` + ``head: <kind>``. The options and the checks, made
before any work: a head that cannot sit on an encoder says why. Imports no torch (``x-train --dry``)."""

from __future__ import annotations

from typing import Any

from xdpx.config.options import Option, Rule
from xdpx.models import models
from xdpx.models.encoders import encoders
from xdpx.models.heads import heads


def composition(args: Any) -> tuple[str, str] | None:
    """(encoder, head) of the config: its own, or the alias's; None for a whole model (re2, match_cnn)."""
    name = args.get("model")
    if name is None:
        return args.get("encoder"), args.get("head")
    entry = models.get(name)
    return (entry.encoder, entry.head) if hasattr(entry, "encoder") else None


def model_label(args: Any) -> str:
    """How logs and messages name the model: its name, or ``<encoder> encoder + <head> head``."""
    if args.get("model") is not None:
        return str(args.model)
    return f"{args.get('encoder')} encoder + {args.get('head')} head"


def head_name(args: Any) -> str | None:
    """The head of the configured model (None for a whole model)."""
    pair = composition(args)
    return pair[1] if pair else None


def _one_way(args: Any) -> bool:
    if args.get("model") is not None:
        return args.get("encoder") is None and args.get("head") is None
    return args.get("encoder") is not None and args.get("head") is not None


def _refusal(args: Any) -> str | None:
    pair = composition(args)
    if not pair or None in pair:
        return None
    reason = heads.get(pair[1]).refuses(encoders.get(pair[0]), args)
    return None if reason is None else f"head {pair[1]} on encoder {pair[0]}: {reason}"


MODEL_OPTIONS = [
    Option("model", str, default=None, registry=models,
           doc="a whole model by name: the aliases of an encoder and a head that earlier releases and the original "
               "XDPX name (bert_classification = encoder bert + head classification, cls_cnn, bert_ner, ...; "
               "docs/models.md has the table), or a pair-interaction model (re2, match_cnn). Or leave it out "
               "and give encoder and head"),
    Option("encoder", str, default=None, registry=encoders,
           doc="the encoder family: bert (ours), hf (any transformers AutoModel, decoder-only ones included), "
               "cnn (TextCNN), lstm (BiLSTM); see xdpx/models/encoders/"),
    Option("head", str, default=None, registry=heads,
           doc="the task head on the encoder: classification (also pairs in one sequence and regression), "
               "siamese, tagging (NER, optional CRF), bi_encoder (embeddings), mlm, pretrain; see "
               "xdpx/models/heads/"),
    Rule(_one_way, "choose the model one way: model: <name>, or encoder: <family> with head: <kind> (a model name "
                   "already fixes both: bert_ner is encoder bert + head tagging)", keys=("model", "encoder", "head")),
    Rule(lambda a: _refusal(a) is None, _refusal, keys=("encoder", "head", "model")),
]
