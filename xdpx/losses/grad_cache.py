"""Gradient caching (Gao et al., 2021, "Scaling Deep Contrastive Learning Batch Size under Memory Limited
Setup"; sentence-transformers' Cached* losses): a large batch of in-batch negatives in the memory of a small one.

An in-batch loss couples every sample of the batch, so it cannot be split into micro-batches the way
update_freq splits a classification batch. Its gradient can: the loss depends on the model only through the
embeddings. :func:`cached_embeddings` therefore

1. embeds the batch in chunks of ``chunk_size`` samples without building a graph (little activation memory),
   and returns the embeddings ``[B, K, D]`` as one tensor the loss reads as usual;
2. when the trainer's backward reaches them with d(loss)/d(embeddings), runs each chunk again with a graph and
   backpropagates that chunk's share into the weights, one chunk at a time.

Peak activation memory is one chunk's graph; the loss and its gradient are those of the whole batch (the
embeddings agree to float rounding: chunked matrix products may round differently). Each chunk's recompute
replays the random state of its first pass, so dropout draws the same masks twice; with dropout the masks
differ from those one unchunked pass would draw (same distribution). The trainer's autocast is replayed too.
Under DDP every chunk but the last accumulates its gradients without a sync, as update_freq's micro-batches do.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
from torch import nn


def split_net_input(net_input: dict[str, Any], chunk_size: int) -> list[dict[str, Any]]:
    """The batch's inputs as chunks of at most ``chunk_size`` samples (every tensor is batch-first)."""
    size = next(v.size(0) for v in net_input.values() if torch.is_tensor(v))
    return [{k: v[start: start + chunk_size] if torch.is_tensor(v) else v for k, v in net_input.items()}
            for start in range(0, size, chunk_size)]


def _autocast_state(device_type: str) -> tuple[bool, torch.dtype]:
    return torch.is_autocast_enabled(device_type), torch.get_autocast_dtype(device_type)


class _CachedForward(torch.autograd.Function):
    """Output: the chunks' embeddings computed without a graph; backward: the chunks again, with one."""

    @staticmethod
    def forward(ctx: Any, anchor: torch.Tensor, model: nn.Module, chunks: list[dict[str, Any]],
                device_type: str) -> torch.Tensor:
        ctx.model, ctx.chunks, ctx.device_type = model, chunks, device_type
        ctx.autocast = _autocast_state(device_type)
        ctx.cuda = device_type == "cuda"
        ctx.rng_states, outputs = [], []
        for chunk in chunks:
            ctx.rng_states.append((torch.get_rng_state(), torch.cuda.get_rng_state() if ctx.cuda else None))
            with torch.no_grad(), torch.autocast(device_type, dtype=ctx.autocast[1], enabled=ctx.autocast[0]):
                outputs.append(model(**chunk).float())
        ctx.sizes = [o.size(0) for o in outputs]
        return torch.cat(outputs)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[Any, ...]:
        model, last = ctx.model, len(ctx.chunks) - 1
        no_sync: Callable[[], Any] = getattr(model, "no_sync", contextlib.nullcontext)
        grads = grad_output.split(ctx.sizes)
        # the random state after the first passes is what the rest of the step continues from
        with torch.random.fork_rng(devices=[torch.cuda.current_device()] if ctx.cuda else []):
            for i, (chunk, (cpu_state, cuda_state), grad) in enumerate(zip(ctx.chunks, ctx.rng_states, grads)):
                torch.set_rng_state(cpu_state)
                if cuda_state is not None:
                    torch.cuda.set_rng_state(cuda_state)
                with no_sync() if i < last else contextlib.nullcontext(), torch.enable_grad():
                    with torch.autocast(ctx.device_type, dtype=ctx.autocast[1], enabled=ctx.autocast[0]):
                        embeddings = model(**chunk).float()
                    torch.autograd.backward(embeddings, grad)
        return None, None, None, None


def cached_embeddings(model: nn.Module, net_input: dict[str, Any], chunk_size: int) -> torch.Tensor:
    """``model(**net_input)`` (float32) for a loss to read, with the activation memory of ``chunk_size``
    samples when gradients are on (training); a plain forward otherwise (evaluation) or for a small batch."""
    chunks = split_net_input(net_input, chunk_size)
    if not torch.is_grad_enabled() or len(chunks) <= 1:
        return model(**net_input)
    device = next(v for v in net_input.values() if torch.is_tensor(v)).device
    # a leaf that requires grad, so autograd calls backward even though the chunks ran without a graph
    anchor = torch.empty(0, requires_grad=True)
    return _CachedForward.apply(anchor, model, chunks, device.type)
