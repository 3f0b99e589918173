"""The two parts of a model: an :class:`Encoder` (text -> per-token states and a sentence vector) and a
:class:`Head` (those -> a task's outputs). xdpx/models/composed.py puts one of each into a model.

A part is not an ``nn.Module`` itself: it builds the modules it needs and names them (``modules``), and
the composed model registers those names at its top level. So a model's state_dict keys are the ones the
parts choose, and they are transformers' own where a transformers class exists: our BERT under ``bert.``
(BertFor*'s base-model prefix), a transformers AutoModel under ``encoder.``, the heads' layers at the top
(``classifier.``, ``crf.``, ``cls.predictions.``), so Hugging Face checkpoints and the run directories of
earlier releases load key for key. The part keeps the modules as attributes for its forward.

Encoders and heads are registered like every component (``encoders`` / ``heads`` in xdpx/models/__init__.py),
declare their options, and say which combinations they refuse (:meth:`Head.refuses`), so a config that
cannot work fails before any work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from xdpx.config.options import Option
from xdpx.losses.ner import target_labels
from xdpx.models.heads import heads
from xdpx.models.modules.pooling import masked_max, masked_mean
from xdpx.models.st_folder import read_st_folder

# pooling names every encoder understands (an encoder lists the ones it offers in ``poolings``)
POOLING_DOCS = {
    "cls": "the first token's last hidden state ([CLS] / <s>)",
    "mean": "the mean of the last layer over real tokens",
    "max": "the maximum of the last layer over real tokens, per feature",
    "last": "the last real token's state (decoder-only models: the only token that saw the whole text)",
    "pooler": "the model's own pooler over the first token (BERT's tanh dense, pretrained with it)",
    "attention": "a learned attention-weighted average of the token states",
}


class Perturbable:
    """A model whose ``forward(**net_input, perturb=f)`` passes its input embeddings ``[B, T, E]`` and mask
    ``[B, T]`` through ``f`` before the layers above them: FreeLB's adversarial steps (xdpx/tasks/freelb.py).
    Every encoder-and-head model is one."""


@dataclass
class Text:
    """One batch of texts as every encoder takes it: ids ``[B, T]``, mask ``[B, T]`` (1 on real tokens)
    and token types ``[B, T]`` (None where the input has none)."""

    ids: torch.Tensor
    mask: torch.Tensor
    types: torch.Tensor | None = None


class Part:
    """What encoders and heads share: the options they declare and the named modules they build."""

    options: list[Any] = []

    def __init__(self, args: Any) -> None:
        self.args = args
        self.modules: dict[str, nn.Module] = {}

    def add(self, name: str, module: nn.Module) -> Any:
        """Build-time: register ``module`` under ``name`` (the state_dict prefix) and return it."""
        self.modules[name] = module
        return module


class Encoder(Part):
    """An encoder family. Subclasses build their modules in ``__init__`` and implement :meth:`embed`
    (ids -> input embeddings, where FreeLB perturbs) and :meth:`contextualize` (embeddings -> states)."""

    poolings: tuple[str, ...] = ("cls", "mean", "max")
    layered = False  # transformer layers: LoRA, freeze_layers, layer_lr_decay, hidden states, checkpointing
    has_mlm_head = False  # the family ships a masked-LM head (heads mlm / pretrain)
    hf_class_prefix: str | None = None  # our BERT: "Bert" (+ the head's hf_task: transformers' class name)
    width: int = 0  # the states' feature size
    pad_index: int = 0

    # ---- forward ------------------------------------------------------------------------------------
    def text(self, net_input: dict[str, Any], field: str | None = None) -> Text:
        """The batch's text: ``field`` (a bi-encoder's tokens1...), else input_ids (with attention_mask and
        token_type_ids) or tokens. A mask the processor did not send is read off the padding."""
        if field is not None:
            ids = net_input[field]
            return Text(ids, ids.ne(self.pad_index).long())
        if "input_ids" in net_input:
            ids = net_input["input_ids"]
            mask = net_input.get("attention_mask")
            return Text(ids, mask if mask is not None else ids.ne(self.pad_index).long(), net_input.get("token_type_ids"))
        ids = net_input["tokens"]
        return Text(ids, ids.ne(self.pad_index).long())

    def embed(self, text: Text) -> torch.Tensor:
        """The input embeddings ``[B, T, E]`` (what FreeLB perturbs)."""
        raise NotImplementedError

    def contextualize(self, embeddings: torch.Tensor, text: Text, first_token_only: bool = False) -> torch.Tensor:
        """Per-token states ``[B, T, width]``; with ``first_token_only`` an encoder may compute the first
        token alone in its last layer (``[B, 1, width]``: our BERT does, for heads that read only [CLS])."""
        raise NotImplementedError

    def pool(self, states: torch.Tensor, text: Text) -> torch.Tensor:
        """The sentence vector ``[B, width]`` by the ``pooling`` option."""
        return pool(self.args.pooling, states, text.mask)

    def reads_first_token_only(self) -> bool:
        """Whether the sentence vector depends on the first token's state alone."""
        return self.args.pooling in ("cls", "pooler")

    def encode(self, text: Text, first_token_only: bool = False) -> torch.Tensor:
        return self.contextualize(self.embed(text), text, first_token_only)

    def default_dropout(self) -> float:
        """The dropout a head on this encoder gets unless classifier_dropout says otherwise."""
        return float(self.args.get("dropout", 0.1))

    def dropout(self, p: float) -> nn.Module:
        """The dropout layer of heads on this encoder (the transformer encoders: our cheaper CPU dropout)."""
        return nn.Dropout(p)

    # ---- building -----------------------------------------------------------------------------------
    def initialize(self, model: nn.Module) -> None:
        """Initial weights of the whole model (the head's layers included) after construction."""

    def load_pretrained(self, model: nn.Module, path: str, log: Any = print) -> bool:
        """Load ``pretrained_model`` the family's own way; False: the generic loader reads it by key."""
        return False

    def tie_weights(self, model: nn.Module) -> None:
        """Share weights between the parts (an MLM decoder and the word embeddings)."""

    # ---- layers (xdpx/models/layer_groups.py, LoRA, FSDP, distillation) -----------------------------
    def embedding_module(self) -> nn.Module:
        raise NotImplementedError(f"{type(self).__name__} has no transformer layers")

    def encoder_layers(self) -> list[nn.Module]:
        raise NotImplementedError(f"{type(self).__name__} has no transformer layers")

    def encoder_module(self) -> nn.Module:
        """The pretrained backbone; a parameter outside it belongs to the head."""
        raise NotImplementedError(f"{type(self).__name__} has no transformer layers")

    def hf_model_type(self) -> str | None:
        """transformers' model_type of the backbone (LoRA's default targets, export_hf), None if none."""
        return None

    def hf_config(self) -> dict[str, Any]:
        """config.json of the equivalent transformers base model (export_hf)."""
        raise NotImplementedError(f"{type(self).__name__} has no transformers form")


class Head(Part):
    """A task's output layer(s) over an encoder. ``needs`` says what it reads: ``sentence`` (a vector per
    text), ``tokens`` (every token's state) or ``texts`` (several texts encoded on their own)."""

    needs = "sentence"
    pooling_default: str | None = None  # the pooling this head prefers where the encoder offers it
    needs_pooler = False  # the head reads the encoder's pooler itself (sentence order: pretrain)
    hf_task: str | None = None  # transformers' *For<task> suffix (export_hf, config.json's architectures)

    def __init__(self, args: Any, encoder: Encoder) -> None:
        super().__init__(args)
        self.encoder = encoder

    @classmethod
    def refuses(cls, encoder: type[Encoder], args: Any) -> str | None:
        """Why this head cannot sit on ``encoder`` with these options (None: it can). Checked with the
        config, before any work."""
        return None

    def reads_first_token_only(self) -> bool:
        """Whether the outputs depend on the first token's last state alone (the encoder may skip the rest)."""
        return self.needs == "sentence" and self.encoder.reads_first_token_only()

    def forward(self, net_input: dict[str, Any], perturb: Any = None, first_token_only: bool = False) -> Any:
        """The head's outputs for one batch: encode (perturbing the embeddings when FreeLB asks), read.
        ``first_token_only``: the model's :meth:`reads_first_token_only`, passed down."""
        text = self.encoder.text(net_input)
        embeddings = self.encoder.embed(text)
        if perturb is not None:
            embeddings = perturb(embeddings, text.mask)
        return self.read(self.encoder.contextualize(embeddings, text, first_token_only), text, net_input)

    def read(self, states: torch.Tensor, text: Text, net_input: dict[str, Any]) -> Any:
        raise NotImplementedError


def labels_of(args: Any, count: int) -> list[str]:
    """Class names in id order from target_map.txt of the run directory or data_dir (LABEL_i without)."""
    try:
        names = target_labels(args)
    except FileNotFoundError:
        names = []
    return names if len(names) == count else [f"LABEL_{i}" for i in range(count)]


# ---- pooling ------------------------------------------------------------------------------------------
def pool(strategy: str, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``[B, T, H]`` states -> ``[B, H]`` by ``strategy`` (cls, mean, max, last); mask 1 on real tokens."""
    if strategy == "cls":
        return states[:, 0]
    if strategy == "mean":
        return masked_mean(states, mask.bool())
    if strategy == "max":
        return masked_max(states, mask.bool())
    if strategy == "last":
        return states[torch.arange(states.size(0), device=states.device), last_real(mask)]
    raise ValueError(f"pooling {strategy!r} is not a plain pooling")


def pooling_option(choices: tuple[str, ...], fallback: Any) -> Option:
    """An encoder's ``pooling`` option: its own choices; by default the head's preference where the encoder
    offers it (a bi-encoder: mean), else ``fallback`` (a value, or a function of the options)."""
    def default(args: Any) -> str:
        folder = read_st_folder(args.get("pretrained_model"))
        if folder is not None and folder.pooling in choices:  # a sentence-transformers folder's own pooling
            return folder.pooling
        preferred = heads.get(args.head).pooling_default if args.get("head") in heads else None
        if preferred in choices:
            return preferred
        return fallback(args) if callable(fallback) else fallback

    docs = "; ".join(f"{name}: {POOLING_DOCS[name]}" for name in choices)
    return Option("pooling", str, default=default, choices=choices,
                  default_doc=f"a sentence-transformers pretrained_model's pooling; else the head's preference "
                              f"where offered (bi_encoder, siamese: mean), else "
                              f"{fallback if isinstance(fallback, str) else 'the encoder family default'}",
                  doc=f"how the token states become the sentence vector: {docs}")


def last_real(mask: torch.Tensor) -> torch.Tensor:
    """Index of each row's last real token, whether the padding is on the right or on the left."""
    positions = torch.arange(mask.size(1), device=mask.device).expand_as(mask)
    return (positions * mask.bool()).amax(dim=1)


def exporting() -> bool:
    """Whether the forward runs under TorchScript tracing or torch.export: shapes computed from the data
    would be frozen into the exported graph there (xdpx/models/bert_layers.py attention_bias does the same)."""
    return torch.jit.is_tracing() or torch.compiler.is_exporting()


def options_view(args: Any, values: dict[str, Any]) -> Any:
    """``args`` with ``values`` put over it (what an alias fixes, the defaults of a part's options)."""
    return _View(args, values)


class _View:
    """Attribute and ``get`` access to ``values`` first, then to ``args``."""

    def __init__(self, args: Any, values: dict[str, Any]) -> None:
        object.__setattr__(self, "_args", args)
        object.__setattr__(self, "_values", dict(values))

    def __getattr__(self, name: str) -> Any:
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        return getattr(object.__getattribute__(self, "_args"), name)

    def get(self, name: str, default: Any = None) -> Any:
        values = object.__getattribute__(self, "_values")
        return values[name] if name in values else self._args.get(name, default)

    def __contains__(self, name: str) -> bool:
        return name in self._values or name in self._args
