"""layer_lr_decay / head_lr_multiplier / freeze_layers on both encoder families (xdpx/models/layer_groups.py),
and LoRA's default target modules on every transformers architecture, each merged within 1e-5."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from tests.bert.bert_helpers import ROOT, TINY
from tests.models_hf.hf_builders import ARCHITECTURES, SIZE
from xdpx.config.options import resolve
from xdpx.errors import UserError
from xdpx.models import models
from xdpx.optim import lr_schedulers, optimizers

pytest.importorskip("peft")
pytest.importorskip("transformers")

LR = 1e-3


def hf_config(architecture: str) -> dict[str, Any]:
    """A tiny random config.json of ``architecture`` (hidden 32, 2 layers; as tests/models_hf builds)."""
    _, overrides = ARCHITECTURES[architecture]
    size = {"max_position_embeddings": 128} if architecture == "distilbert" else dict(SIZE)
    config = {"model_type": architecture, "vocab_size": 120, "pad_token_id": 0, **size, **overrides}
    if architecture == "modernbert":
        config.update(cls_token_id=1, sep_token_id=2, bos_token_id=1, eos_token_id=2)
    return config


def build(seed: int = 0, **config: Any) -> tuple[Any, Any]:
    """(args, model) as x-train builds them: seeded, then wrapped with LoRA when ``lora`` is set."""
    from xdpx.models.lora import add_lora

    if config.get("model", "bert_classification").startswith("bert"):
        config = {**TINY, **config}
    args = resolve({"pretrained_model": None, "learning_rate": LR, "num_classes": 2, **config}, ROOT, "test")
    torch.manual_seed(seed)
    model = models.get(args.model).build(args)
    if args.get("lora") is not None:
        add_lora(model, args, say=lambda _message: None)
    return args, model


def lr_of_each_parameter(args: Any, model: Any) -> dict[str, float]:
    optimizer = optimizers.get(args.optimizer).build(args, model)
    lr_schedulers.get(args.lr_scheduler)(args, 10).step_update(optimizer, 0)
    lr_of = {id(p): group["lr"] for group in optimizer.param_groups for p in group["params"]}
    return {name: lr_of[id(p)] for name, p in model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("config", [
    {"model": "bert_classification", "lora": {"r": 2}},
    {"model": "hf_classification", "hf_config": hf_config("bert"), "pooling": "pooler"},
], ids=["bert-with-lora", "transformers-bert"])
def test_layer_lr_decay_and_head_multiplier_set_each_parameters_lr(config: dict[str, Any]) -> None:
    args, model = build(layer_lr_decay=0.5, head_lr_multiplier=10.0, **config)
    lrs = lr_of_each_parameter(args, model)
    layers = list(model.encoder_layers())
    names = {id(p): n for n, p in model.named_parameters()}
    expected = {}
    for p in model.encoder_module().parameters():
        expected[names[id(p)]] = LR  # pooler
    for p in model.embedding_module().parameters():
        expected[names[id(p)]] = LR * 0.5 ** 3
    for i, layer in enumerate(layers):
        for p in layer.parameters():
            expected[names[id(p)]] = LR * 0.5 ** (2 - i)
    expected.update({"classifier.weight": LR * 10, "classifier.bias": LR * 10})
    assert set(lrs) <= set(expected) and {"classifier.weight", "classifier.bias"} <= set(lrs)
    for name, lr in lrs.items():
        assert lr == pytest.approx(expected[name], rel=1e-12), name
    if "lora" in config:  # only adapters of layers 0 and 1, and the head
        assert {lr for name, lr in lrs.items() if ".lora_" in name} == {LR * 0.25, LR * 0.5}
        assert len(lrs) == 2 + 2 * 2 * 2
    else:  # the word embeddings, layer 0 and the pooler in the transformers model
        assert lrs["encoder.embeddings.word_embeddings.weight"] == pytest.approx(LR / 8)
        assert lrs["encoder.encoder.layer.0.attention.self.query.weight"] == pytest.approx(LR / 4)
        assert lrs["encoder.pooler.dense.weight"] == pytest.approx(LR)


def test_freeze_layers_on_the_transformers_family() -> None:
    _, model = build(model="hf_classification", hf_config=hf_config("roberta"), freeze_layers=1)
    layers = list(model.encoder_layers())
    assert not any(p.requires_grad for p in model.embedding_module().parameters())
    assert not any(p.requires_grad for p in layers[0].parameters())
    assert all(p.requires_grad for p in layers[1].parameters())
    assert model.classifier.weight.requires_grad
    with pytest.raises(UserError, match="freeze_layers: 3 is more than the 2 transformer layers of the model"):
        build(model="hf_classification", hf_config=hf_config("roberta"), freeze_layers=3)


def test_lora_default_targets_on_every_architecture_merge_within_1e_5() -> None:
    from xdpx.models.lora import merge_lora

    expected = {"deberta-v2": {"query_proj", "value_proj"}, "distilbert": {"q_lin", "v_lin"},
                "modernbert": {"Wqkv"}}
    ids = torch.randint(3, 120, (3, 10), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    for architecture in ARCHITECTURES:
        _, model = build(model="hf_classification", hf_config=hf_config(architecture), lora={},
                         attn_implementation="eager")
        adapted = {n.split(".lora_A.")[0].rsplit(".", 1)[-1] for n, _ in model.named_parameters() if ".lora_A." in n}
        assert adapted == expected.get(architecture, {"query", "value"}), architecture
        trainable = {n for n, p in model.named_parameters() if p.requires_grad}
        assert trainable == {n for n in trainable if ".lora_" in n} | {"classifier.weight", "classifier.bias"}
        model.eval()
        with torch.no_grad():
            before = model(input_ids=ids, attention_mask=mask)  # B = 0: the adapters change nothing yet
            for name, p in model.named_parameters():
                if ".lora_B." in name:  # give the adapters an effect to merge
                    p.normal_(std=0.1)
            adapters = model(input_ids=ids, attention_mask=mask)
            merged = merge_lora(copy.deepcopy(model)).eval()
            plain = merged(input_ids=ids, attention_mask=mask)
        assert not any(".lora_" in n or "base_layer" in n for n in merged.state_dict())
        assert (adapters - before).abs().max() > 1e-4, architecture
        torch.testing.assert_close(plain, adapters, atol=1e-5, rtol=0, msg=architecture)
