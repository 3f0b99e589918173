"""Batch-invariant predictions for the transformers family (the entry tests/inference/test_batch_invariance.py
points here: these models need the tiny model folders that tests/models_hf/conftest.py builds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.inference.test_batch_invariance import model_args, per_sample_outputs

pytest.importorskip("transformers")

SAMPLES = 32


def config_of(folder: Path) -> dict:
    return json.loads((folder / "config.json").read_text())


# one architecture per tokenizer kind and attention kind (DeBERTa's relative positions, ModernBERT's local
# attention with unpadding, RoBERTa's padding-offset positions)
@pytest.mark.parametrize("architecture", ["bert", "roberta", "deberta-v2", "modernbert"])
@pytest.mark.parametrize("model", ["hf_classification", "hf_pair"])
def test_batch_size_1_and_256_agree(architecture: str, model: str, hf_models: dict[str, Path],
                                    hf_polarity: dict[str, Path]) -> None:
    from xdpx.data import processors
    from xdpx.data.dataset import open_split
    from xdpx.models import models

    data_dir = hf_polarity[architecture]
    args = model_args(model, data_dir, {"hf_config": config_of(hf_models[architecture]), "pooling": "mean",
                                        "pretrained_model": None})
    torch.manual_seed(0)
    built = models.get(model).build(args).eval()
    processor = processors.get(args.processor)(args)
    dataset = open_split(str(data_dir), "dev")
    samples = [dataset[i] for i in range(min(SAMPLES, len(dataset)))]
    assert len({len(s[processor.fields[0]]) for s in samples}) > 5, "lengths must differ so the big batch pads"
    alone = per_sample_outputs(built, processor, samples, 1)
    together = per_sample_outputs(built, processor, samples, 256)
    worst = max(float((abs(a - b)).max()) for x, y in zip(alone, together) for a, b in zip(x, y))
    assert worst < 1e-5, f"{model} / {architecture}: outputs differ by up to {worst:.2e} between batch 1 and 256"
