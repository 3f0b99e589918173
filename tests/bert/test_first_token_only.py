"""A [CLS]-pooling head lets the encoder's last layer compute the first token only: the same logits and
gradients as the whole last layer, a [B, 1, H] output, and the whole layer again where the head reads
every token (mean pooling) or where nothing asks for it (BertModel's own forward)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.bert.bert_helpers import batch, build
from xdpx.models.bert_layers import count_flops


def logits_and_gradients(model, inputs, target, first_only):
    model.zero_grad(set_to_none=True)
    original = type(model).reads_first_token_only
    type(model).reads_first_token_only = lambda self: first_only
    try:
        logits = model(**inputs)
    finally:
        type(model).reads_first_token_only = original
    F.cross_entropy(logits, target).backward()
    return logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("model_name", ["bert_classification", "bert_pair", "bert_siamese"])
def test_last_layer_at_the_first_token_gives_the_same_logits_and_gradients(model_name):
    extra = {"pooling": "cls"} if model_name == "bert_siamese" else {}
    model = build(model=model_name, **extra).eval()  # eval: no dropout, so the two runs compute the same
    assert model.reads_first_token_only()
    inputs, target = batch(), torch.tensor([0, 2, 1, 0])
    fast, fast_grads = logits_and_gradients(model, inputs, target, True)
    full, full_grads = logits_and_gradients(model, inputs, target, False)
    torch.testing.assert_close(fast, full, rtol=1e-5, atol=1e-6)
    assert fast_grads.keys() == full_grads.keys()
    assert any(n.startswith("bert.encoder.layer.1.output") for n in fast_grads)
    for name, grad in full_grads.items():
        torch.testing.assert_close(fast_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_the_last_layer_returns_the_first_token_and_mean_pooling_keeps_every_token():
    model = build().eval()
    inputs = batch()
    embedded = model.bert.embeddings(inputs["input_ids"], inputs["token_type_ids"])
    first = model.bert.encode(embedded, inputs["attention_mask"], first_only=True)
    every = model.bert.encode(embedded, inputs["attention_mask"])
    assert first.shape == (4, 1, 32) and every.shape == (4, 12, 32)
    torch.testing.assert_close(first[:, 0], every[:, 0], rtol=1e-5, atol=1e-6)
    hidden, _ = model.bert(**inputs)  # BertModel's forward: HF's last hidden states, every token
    assert hidden.shape == (4, 12, 32)
    assert not build(pooling="mean").reads_first_token_only()
    assert not build(model="bert_siamese").reads_first_token_only()  # its default pooling is mean


def test_flops_of_the_first_token_only_last_layer():
    model = build()  # hidden 32, 2 layers, intermediate 48: 2 * 32^2 * 4 + 2 * 32 * 48 = 11,264 per layer
    rows, length = 4, 10
    tokens = rows * length
    per_layer = 4 * 32 * 32 + 2 * 32 * 48
    full = 6.0 * 2 * per_layer * tokens + 12.0 * 2 * length * 32 * tokens
    assert count_flops(model, tokens, length) == full
    last = 6.0 * 2 * 32 * 32 * tokens + 6.0 * (per_layer - 2 * 32 * 32) * rows + 12.0 * length * 32 * rows
    expected = 6.0 * per_layer * tokens + 12.0 * length * 32 * tokens + last
    assert count_flops(model, tokens, length, first_only=True) == pytest.approx(expected)
