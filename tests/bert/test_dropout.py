"""xdpx's CPU dropout (15-bit masks from int32 draws) and BERT's written-out attention with dropout."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from xdpx.models.bert_layers import written_out_attention, written_out_is_faster
from xdpx.models.modules.dropout import Dropout, dropout


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_drop_rate_and_expectation_match_p(p):
    x = torch.ones(1000, 1000)
    torch.manual_seed(0)
    y = dropout(x, p)
    dropped = float((y == 0).float().mean())
    assert abs(dropped - p) < 0.003  # 1e6 draws: the binomial sd is under 5e-4
    kept = y[y != 0]
    assert torch.allclose(kept, torch.full_like(kept, 32768 / (32768 - round(p * 32768))))
    assert abs(float(y.mean()) - 1.0) < 0.006


def test_masks_follow_torch_seed_and_gradient_is_the_mask():
    x = torch.randn(7, 33, 5, requires_grad=True)  # odd element count: the last int32 draw is half used
    torch.manual_seed(4)
    a = dropout(x, 0.2)
    torch.manual_seed(4)
    b = dropout(x, 0.2)
    assert torch.equal(a, b)
    assert not torch.equal(a, dropout(x, 0.2))  # the generator moved on
    a.sum().backward()
    scale = 32768 / (32768 - round(0.2 * 32768))
    expected = (a != 0).float() * scale
    torch.testing.assert_close(x.grad, expected)


def test_eval_mode_and_zero_p_are_identity_and_bf16_keeps_its_dtype():
    x = torch.randn(4, 6)
    module = Dropout(0.5).eval()
    assert module(x) is x
    assert dropout(x, 0.0) is x
    y = dropout(x.to(torch.bfloat16), 0.5)
    assert y.dtype == torch.bfloat16 and 0 < int((y == 0).sum()) < y.numel()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64])
def test_mask_is_the_scaled_mask_bit_for_bit(dtype):
    # every float dtype builds the scaled mask by an integer multiply of the mask's bits: it must equal the
    # float path (the 0/1 mask cast to the dtype, times the scale in the dtype) for the same draws
    x = torch.randn(3, 17, 11, dtype=dtype, requires_grad=True)
    torch.manual_seed(9)
    y = dropout(x, 0.1)
    torch.manual_seed(9)
    keep = torch.empty((x.numel() + 1) // 2, dtype=torch.int32).random_().view(torch.int16)[: x.numel()]
    keep = keep.bitwise_and_(32767).ge_(round(0.1 * 32768)).view(x.shape)
    scale = 32768 / (32768 - round(0.1 * 32768))
    mask = keep.to(dtype) * scale
    assert y.dtype == dtype and torch.equal(y, x * mask)
    y.sum().backward()
    assert torch.equal(x.grad, mask) and 0 < int((mask == 0).sum()) < mask.numel()


def test_written_out_attention_equals_sdpa():
    torch.manual_seed(0)
    q, k, v = (torch.randn(3, 4, 9, 8) for _ in range(3))
    mask = torch.ones(3, 1, 1, 9, dtype=torch.bool)
    mask[0, ..., 5:] = False
    mask[2, ..., 1:] = False
    got = written_out_attention(q, k, v, mask)
    torch.testing.assert_close(got, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=1e-6, rtol=1e-5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = written_out_attention(q, k, v, mask)
    assert low.dtype == torch.bfloat16
    torch.testing.assert_close(low.float(), got, atol=0.05, rtol=0.05)


def test_attention_dropout_zeroes_whole_probabilities():
    """with v = identity rows, the output rows are the (dropped, rescaled) attention probabilities"""
    torch.manual_seed(1)
    q, k = torch.randn(2, 1, 6, 6), torch.randn(2, 1, 6, 6)
    v = torch.eye(6).expand(2, 1, 6, 6)
    probs = torch.softmax(q @ k.transpose(-1, -2) / 6 ** 0.5, dim=-1)
    torch.manual_seed(2)
    got = written_out_attention(q, k, v, None, 0.5)
    kept = got != 0
    assert 0 < int(kept.sum()) < kept.numel()
    torch.testing.assert_close(got[kept], (probs * 2)[kept])


def test_written_out_attention_is_chosen_where_it_is_faster():
    q32, q16 = torch.zeros(1, 1, 2, 2), torch.zeros(1, 1, 2, 2, dtype=torch.bfloat16)
    assert written_out_is_faster(q32, 0.1) and written_out_is_faster(q16, 0.0)
    assert not written_out_is_faster(q32, 0.0)  # fp32 without dropout: SDPA's flash kernel
    with torch.no_grad():  # inference: SDPA
        assert not written_out_is_faster(q16, 0.1)


def test_bf16_attention_rounds_the_probabilities_once():
    """under bf16 the softmax takes the bf16 scores and rounds its fp32 result once: within one bf16
    rounding of fp32 probabilities rounded to bf16 (HF's eager order), gradients within ~1%"""
    torch.manual_seed(3)
    q, k = (torch.randn(2, 3, 7, 8, dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
    v = torch.eye(7, 8, dtype=torch.bfloat16).expand(2, 3, 7, 8).clone().requires_grad_(True)
    mask = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    mask[1, ..., 4:] = False
    got = written_out_attention(q, k, v, mask)
    scores = (q * 8 ** -0.5) @ k.transpose(-1, -2)
    reference = torch.softmax(scores.masked_fill(~mask, -1e30).float(), dim=-1).to(torch.bfloat16) @ v
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), reference.float(), rtol=2 ** -7, atol=2 ** -9)
    assert bool((got[1, ..., 4:] == 0).all())  # padded keys get no weight
    grad = torch.randn_like(got)
    (got_q,) = torch.autograd.grad(got, q, grad)
    (reference_q,) = torch.autograd.grad(reference, q, grad)
    assert float((got_q.float() - reference_q.float()).norm() / reference_q.float().norm()) < 0.01
