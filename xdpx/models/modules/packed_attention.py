"""Self-attention over the fused q/k/v projection's output, with a backward that writes the q, k and v
gradients straight into the layout of that output.

BERT's fused projection gives one ``[B, T, 3, heads, d]`` tensor. Written with autograd, attention reads
q, k and v as permuted views of it, and the backward then stacks their three gradients into a
``[3, B, heads, T, d]`` tensor and copies that once more into ``[B, T, 3, heads, d]`` for the
projection's matmul: two copies of the whole q/k/v gradient, plus a copy of q for its scaling and one of
the scores for the padding mask. Here the backward is written out (the same matmuls, softmax backward
and dropout mask), q is scaled in the copy that the matmul needs anyway, the mask is applied in place,
and each gradient is written once, into the projection's layout. Outputs and gradients are bit for bit
those of the autograd version: each matmul gets the same operands in the same memory layouts, so the
BLAS takes the same kernel path on any machine, and training results do not change. Medians of paired
per-update timings of all-MiniLM-L6-v2 (batch 32, one thread, the bench's batches): 1.001x fp32 and
1.011x bf16 on an AMD EPYC (with a transposed view of k instead of its copy, which rounded differently
there: 1.011x and 1.015x on a Xeon with AMX).

Used where :func:`xdpx.models.bert_layers.written_out_is_faster` chooses written-out attention (CPU training
with attention dropout, or not fp32); torch.compile and exports keep SDPA.
"""

from __future__ import annotations

from typing import Any

import torch

from xdpx.models.modules.dropout import dropout_mask


class _PackedSelfAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, qkv: torch.Tensor, mask: torch.Tensor | None, p: float) -> torch.Tensor:
        b, t, _, heads, d = qkv.shape
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # [B, heads, T, d] views
        scale = d ** -0.5
        # the batched matmuls need [B * heads, T, d] blocks: q is scaled as it is copied into its block.
        # k is copied transposed, [B * heads, d, T], as torch.matmul does in the written-out attention:
        # every bmm below gets the operands and memory layouts that the autograd version gives it, so the
        # BLAS takes the same kernel path (a transposed view instead changed fp32 roundings on AMD EPYC)
        qs = torch.empty((b, heads, t, d), dtype=qkv.dtype, device=qkv.device)
        torch.mul(q, scale, out=qs)
        qs, kt, vc = qs.view(-1, t, d), k.transpose(-1, -2).reshape(-1, d, t), v.reshape(-1, t, d)
        scores = torch.bmm(qs, kt)
        if mask is not None:  # True = attend; a finite minimum keeps an all-padding row finite (uniform)
            mask = ~mask
            scores.view(b, heads, t, t).masked_fill_(mask, torch.finfo(scores.dtype).min)
        # the probabilities in the scores' dtype: CPU autocast may give the softmax in fp32
        probs = torch.softmax(scores, dim=-1).to(qkv.dtype)
        keep = dropout_mask(probs, p) if p > 0 else None
        dropped = probs * keep if keep is not None else probs
        out = torch.bmm(dropped, vc)
        ctx.save_for_backward(qs, kt, vc, probs, keep, dropped, mask)  # mask: True = masked out
        ctx.shape, ctx.scale = (b, t, heads, d), scale
        return out.view(b, heads, t, d).transpose(1, 2).reshape(b, t, heads * d)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        qs, kt, vc, probs, keep, dropped, mask = ctx.saved_tensors
        b, t, heads, d = ctx.shape
        grad_out = grad.reshape(b, t, heads, d).transpose(1, 2).reshape(-1, t, d)
        grad_dropped = torch.bmm(grad_out, vc.transpose(1, 2))
        grad_probs = grad_dropped.mul_(keep) if keep is not None else grad_dropped
        grad_scores = torch._softmax_backward_data(grad_probs, probs, -1, probs.dtype)
        if mask is not None:  # as masked_fill's backward: an all-padding row has probabilities 1/T there
            grad_scores.view(b, heads, t, t).masked_fill_(mask, 0.0)
        grad_qkv = torch.empty((b, t, 3, heads, d), dtype=grad.dtype, device=grad.device)
        blocks = grad_qkv.permute(2, 0, 3, 1, 4)  # [3, B, heads, T, d] views of grad_qkv
        # each gradient is written once, into the projection's layout (q's scaled on the way)
        torch.mul(torch.bmm(grad_scores, kt.transpose(1, 2)).view(b, heads, t, d), ctx.scale, out=blocks[0])
        blocks[1].copy_(torch.bmm(qs.transpose(1, 2), grad_scores).view(b, heads, d, t).transpose(2, 3))
        blocks[2].copy_(torch.bmm(dropped.transpose(1, 2), grad_out).view(b, heads, t, d))
        return grad_qkv, None, None


def packed_self_attention(qkv: torch.Tensor, mask: torch.Tensor | None, p: float = 0.0) -> torch.Tensor:
    """``[B, T, 3, heads, d]`` (q, k, v of every head) -> ``[B, T, heads * d]``: softmax(q k^T / sqrt(d),
    masked where ``mask`` is False) v, with dropout ``p`` on the probabilities (xdpx's CPU dropout mask);
    ``mask`` broadcasts to ``[B, heads, T, T]``."""
    return _PackedSelfAttention.apply(qkv, mask, p)
