"""BERT's attention over the packed q/k/v projection (CPU training path): the same outputs and gradients,
bit for bit, as the written-out attention over permuted views, and the same dropout masks."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import xdpx.models.bert_layers as bert
import xdpx.models.bert_layers as bert_layers
from tests.bert.bert_helpers import batch, build
from xdpx.models.modules.dropout import dropout, dropout_mask
from xdpx.models.modules.packed_attention import packed_self_attention


def written_out(qkv: torch.Tensor, mask: torch.Tensor | None, p: float = 0.0) -> torch.Tensor:
    """The autograd path it replaces: q, k, v as permuted views of the projection."""
    b, t, _, heads, d = qkv.shape
    q, k, v = qkv.permute(2, 0, 3, 1, 4)
    return bert.written_out_attention(q, k, v, mask, p).transpose(1, 2).reshape(b, t, heads * d)


def masks(b: int, t: int) -> dict[str, torch.Tensor | None]:
    padding = torch.ones(b, 1, 1, t, dtype=torch.bool)
    padding[0, ..., 5:] = False
    padding[2, ..., 1:] = False  # one real key
    square = torch.ones(b, 1, t, t, dtype=torch.bool).tril()
    square[1, :, 3] = False  # a query row with every key masked: uniform probabilities, no gradient
    return {"none": None, "padding": padding, "square": square}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("p", [0.0, 0.1])
@pytest.mark.parametrize("mask_name", ["none", "padding", "square"])
def test_packed_attention_equals_written_out_bit_for_bit(dtype, p, mask_name):
    b, t, heads, d = 4, 9, 3, 8
    torch.manual_seed(0)
    packed = torch.randn(b, t, 3, heads, d, dtype=dtype)
    grad = torch.randn(b, t, heads * d, dtype=dtype)
    mask = masks(b, t)[mask_name]
    results = []
    for attend in (written_out, packed_self_attention):
        qkv = packed.clone().requires_grad_(True)
        torch.manual_seed(1)  # the same dropout draws on both sides
        out = attend(qkv, mask, p)
        out.backward(grad)
        results.append((out.detach(), qkv.grad))
    (want, want_grad), (got, got_grad) = results
    assert got.dtype == dtype and got_grad.dtype == dtype
    assert torch.equal(got, want) and torch.equal(got_grad, want_grad)
    assert float(got_grad.abs().max()) > 0
    if mask_name == "square":  # the all-masked query row passes no gradient to its keys' scores
        assert torch.isfinite(got_grad).all()


class MatmulLayouts(TorchDispatchMode):
    """Records every bmm with its operands' shapes and strides."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        if func is torch.ops.aten.bmm.default:
            self.calls.append(tuple((tuple(a.shape), a.stride()) for a in args))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_packed_attention_gives_each_matmul_the_written_out_layouts(dtype):
    """Bit-for-bit equality holds on every machine only if each bmm gets the same operands in the same
    memory layouts (a BLAS may round a transposed operand differently: it did on AMD EPYC in fp32)."""
    torch.manual_seed(0)
    packed = torch.randn(4, 9, 3, 3, 8, dtype=dtype)
    seen = []
    for attend in (written_out, packed_self_attention):
        qkv = packed.clone().requires_grad_(True)
        with MatmulLayouts() as layouts:
            attend(qkv, masks(4, 9)["padding"], 0.1).sum().backward()
        seen.append(sorted(layouts.calls))
    assert len(seen[0]) == 6 and seen[1] == seen[0]


def test_packed_attention_under_autocast_matches_written_out():
    torch.manual_seed(2)
    qkv = torch.randn(2, 7, 3, 2, 4, dtype=torch.bfloat16)
    mask = masks(3, 7)["padding"][:2]
    results = []
    for attend in (written_out, packed_self_attention):
        x = qkv.clone().requires_grad_(True)
        torch.manual_seed(3)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = attend(x, mask, 0.1)
        out.float().sum().backward()
        results.append((out.detach(), x.grad))
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_dropout_mask_is_the_mask_dropout_multiplies_by(dtype):
    x = torch.randn(7, 33, 5, dtype=dtype)  # odd element count: the last int32 draw is half used
    torch.manual_seed(5)
    want = dropout(x, 0.2)
    torch.manual_seed(5)
    mask = dropout_mask(x, 0.2)
    assert mask.dtype == dtype and mask.shape == x.shape
    assert torch.equal(x * mask, want)
    assert set(torch.unique(mask).double().tolist()) == {0.0, float(torch.tensor(32768 / 26214, dtype=dtype))}


def test_bert_training_step_is_the_same_with_the_packed_path(monkeypatch):
    """The whole model in training mode (dropout on): loss and every gradient equal, bit for bit, whether
    attention runs packed or written out over views."""
    config = {"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "num_hidden_layers": 3}
    inputs = batch(lengths=(30, 17, 41, 8))
    target = torch.tensor([0, 1, 2, 1])
    calls = []

    def run() -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        model = build(seed=0, **config).train()
        torch.manual_seed(7)
        loss = F.cross_entropy(model(**inputs), target)
        loss.backward()
        return loss.detach(), {n: p.grad for n, p in model.named_parameters()}

    def counted(qkv: torch.Tensor, mask: torch.Tensor | None, p: float) -> torch.Tensor:
        calls.append(p)
        return packed_self_attention(qkv, mask, p)

    monkeypatch.setattr(bert_layers, "packed_self_attention", counted)
    loss, grads = run()
    assert calls == [0.1, 0.1]  # the last layer computes [CLS] only (first-token path); the others packed
    monkeypatch.setattr(bert_layers, "packed_self_attention", written_out)
    want_loss, want_grads = run()
    assert torch.equal(loss, want_loss)
    for name, g in want_grads.items():
        assert torch.equal(grads[name], g), name
