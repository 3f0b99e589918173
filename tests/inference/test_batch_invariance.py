"""Batch-size invariance: every registered model gives the same outputs for a sample alone (batch_size 1)
and padded in a batch of 256 with samples of other lengths (within 1e-5). That holds only when padding
and masks are right everywhere (embeddings, convolutions, recurrences, attention, pooling).

To cover a new model, add an entry to MODEL_CONFIGS: the committed sample its processor reads (a key of
inference_helpers.PREPRO) and the options of a tiny version of the model. A registered model without an
entry fails test_every_registered_model_has_an_entry.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

TINY_BERT = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
             "max_position_embeddings": 160, "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
             "pretrained_model": None}

# model name -> (sample data, options of a tiny model). Outputs are compared per sample: class logits or
# scores, and per-token logits (MLM) at the sample's own positions.
MODEL_CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "cls_cnn": ("reviews_char", {"embedding_dim": 16, "num_filters": 8, "kernel_sizes": [2, 3, 4]}),
    "cls_lstm": ("reviews_char", {"embedding_dim": 16, "hidden_size": 12, "num_layers": 2, "pooling": "attention"}),
    "match_cnn": ("stsb_pair", {"embedding_dim": 16, "hidden_size": 16, "kernel_sizes": [2, 3], "pooling": "mean"}),
    "re2": ("stsb_pair", {"embedding_dim": 16, "hidden_size": 16, "blocks": 3, "kernel_sizes": [2, 3]}),
    "bert_classification": ("reviews_bert", {**TINY_BERT, "pooling": "mean"}),
    "bert_pair": ("stsb_bert", TINY_BERT),
    "bert_siamese": ("stsb_bert", TINY_BERT),
    "bert_lm": ("peoples_daily_mlm", TINY_BERT),
    "bert_pretrain": ("stsb_bert", TINY_BERT),
    "lstm_ner": ("peoples_daily_ner", {"embedding_dim": 16, "hidden_size": 12, "num_layers": 2, "crf": True}),
    "bert_ner": ("peoples_daily_ner_bert", TINY_BERT),
    "bert_bi_encoder": ("stsb_bi_encoder", TINY_BERT),
    "bi_encoder": ("stsb_words_bi_encoder", {"embedding_dim": 16, "hidden_size": 16, "embedding_size": 16}),
}

# models whose batch-invariance test lives beside the fixtures they need
TESTED_ELSEWHERE = {"hf_classification": "tests/models_hf/test_hf_batch_invariance.py",
                    "hf_pair": "tests/models_hf/test_hf_batch_invariance.py"}

SAMPLES = 32  # of the sample's dev split: lengths vary, so a batch of 256 pads most of them


def registered_models() -> list[str]:
    from xdpx.models import models

    return models.names()


def test_every_registered_model_has_an_entry() -> None:
    missing = sorted(set(registered_models()) - set(MODEL_CONFIGS) - set(TESTED_ELSEWHERE))
    assert not missing, (f"models without a batch-invariance entry: {missing}; add them to MODEL_CONFIGS in "
                         "tests/inference/test_batch_invariance.py")


def model_args(name: str, data_dir: Path, options: dict[str, Any]) -> Any:
    """The resolved options of the model on that data (its meta.hjson facts and processing options)."""
    from xdpx.config.loader import load_config
    from xdpx.config.options import Option, resolve
    from xdpx.data.meta import META_OPTIONS
    from xdpx.models import models

    meta = load_config(str(data_dir / "meta.hjson"))[0].values
    root = [*META_OPTIONS, Option("data_dir", str), Option("seed", int, default=1),
            Option("pretrained_model", str, default=None), Option("model", str, registry=models)]
    values = {**meta, "data_dir": str(data_dir), "model": name, **options}
    return resolve(values, root, "test", sources=dict.fromkeys(values, "test config"), check_paths=False)


def per_sample_outputs(model: Any, processor: Any, samples: list[dict[str, Any]], batch_size: int) -> list[list[np.ndarray]]:
    """Each sample's outputs: its row of every output tensor, cut to its own length for per-token ones."""
    import torch

    results = []
    with torch.no_grad():
        for start in range(0, len(samples), batch_size):
            chunk = samples[start: start + batch_size]
            batch = processor.collate(chunk)
            outputs = model(**batch["net_input"])
            outputs = outputs if isinstance(outputs, tuple) else (outputs,)
            for i, sample in enumerate(chunk):
                length = len(sample[processor.fields[0]])
                results.append([(o[i, :length] if o.dim() >= 3 else o[i]).float().numpy() for o in outputs])
    return results


@pytest.mark.parametrize("name", sorted(MODEL_CONFIGS))
def test_batch_size_1_and_256_agree(name: str, prepared: Callable[[str], Path]) -> None:
    import torch

    from xdpx.data import processors
    from xdpx.data.dataset import open_split
    from xdpx.models import models

    if name not in registered_models():
        pytest.skip(f"model {name!r} is not registered")
    data_name, options = MODEL_CONFIGS[name]
    data_dir = prepared(data_name)
    args = model_args(name, data_dir, options)
    torch.manual_seed(0)
    model = models.get(name).build(args).eval()
    processor = processors.get(args.processor)(args)
    processor.set_epoch(1)
    dataset = open_split(str(data_dir), "dev")
    samples = [dataset[i] for i in range(min(SAMPLES, len(dataset)))]
    lengths = {len(s[processor.fields[0]]) for s in samples}
    assert len(lengths) > 5, "the samples should differ in length, so that the big batch pads"
    alone = per_sample_outputs(model, processor, samples, 1)
    together = per_sample_outputs(model, processor, samples, 256)
    worst = max(float(np.abs(a - b).max()) for x, y in zip(alone, together) for a, b in zip(x, y))
    assert worst < 1e-5, f"{name}: outputs differ by up to {worst:.2e} between batch_size 1 and 256"
