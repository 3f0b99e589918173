"""The fused query/key/value projection kept between forwards without gradients: the same numbers as
concatenating anew, renewed when a parameter changes, never in the state_dict."""

from __future__ import annotations

import types

import torch

from xdpx.models.bert_layers import BertSelfAttention


def attention() -> BertSelfAttention:
    torch.manual_seed(0)
    config = types.SimpleNamespace(num_attention_heads=2, hidden_size=8, attention_probs_dropout_prob=0.0)
    return BertSelfAttention(config).eval()


def test_kept_projection_equals_a_fresh_one_and_follows_in_place_updates():
    layer, x = attention(), torch.randn(2, 5, 8)
    fresh = layer(x, None)  # gradients enabled: concatenated in the forward
    assert layer._fused is None
    with torch.inference_mode():
        kept = layer(x, None)
        assert layer._fused is not None
        assert torch.equal(kept, fresh) and torch.equal(layer(x, None), fresh)
    # an optimizer step changes the weights in place: the next forward without gradients sees it
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.5)
    fresh.sum().backward()
    optimizer.step()
    after = layer(x, None)
    with torch.no_grad():
        assert not torch.equal(layer(x, None), kept) and torch.equal(layer(x, None), after)
    with torch.no_grad():  # load_state_dict copies in place too
        layer.load_state_dict(attention().state_dict())
        assert torch.equal(layer(x, None), kept)


def test_kept_projection_follows_a_cast_and_stays_out_of_the_state_dict():
    layer, x = attention(), torch.randn(2, 5, 8)
    with torch.no_grad():
        layer(x, None)
        layer.double()
        assert layer(x.double(), None).dtype == torch.float64 and layer._fused[1].dtype == torch.float64
    assert set(layer.state_dict()) == {f"{n}.{p}" for n in ("query", "key", "value") for p in ("weight", "bias")}


def test_kept_projection_is_dropped_when_training_resumes_after_a_fused_step():
    # torch's fused AdamW (x-train's default) writes the weights without bumping their version: the
    # projection kept by an evaluation must not survive into the next evaluation (it did: x-train's dev
    # scores after the first evaluation used the first evaluation's query/key/value weights)
    layer, x = attention(), torch.randn(2, 5, 8)
    optimizer = torch.optim.AdamW(layer.parameters(), lr=0.1, fused=True)
    layer.eval()
    with torch.no_grad():
        before = layer(x, None)
    layer.train()
    layer(x, None).sum().backward()
    versions = [p._version for p in layer.parameters()]
    optimizer.step()
    assert [p._version for p in layer.parameters()] == versions  # why the version alone cannot tell
    layer.eval()
    with torch.no_grad():
        after = layer(x, None)
    fresh = layer(x, None)  # gradients enabled: concatenated anew
    assert not torch.equal(after, before) and torch.equal(after, fresh.detach())
