"""info_nce's ``gather_negatives`` (sentence-transformers' gather_across_devices): under DDP each process
scores its queries against the candidates of every process, so the pool of in-batch negatives is the
global batch, not this process's micro-batch.

:func:`gather_rows` concatenates the rows of every process (in rank order; the processes' batches may
differ in size: the rows are padded to the largest for the collective and cut back). Its backward sums the
gradient of the gathered tensor over the processes and keeps this process's rows: process ``s``'s loss
depends on process ``r``'s candidates too, and d(sum of the losses)/d(rows of r) reaches r that way. Summed
over the processes by DDP, the gradient is that of one process holding the whole batch.

A loss is on the components floor: this module uses torch.distributed directly, not the trainer's helpers.
Every process must call it the same number of times per update (the option's rules keep update_freq at 1).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist


def world_size() -> int:
    """The number of processes of the default group (1 when torch.distributed is not initialised)."""
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


class _GatherRows(torch.autograd.Function):
    """Forward: every process's rows, concatenated in rank order; backward: the gradient summed over the
    processes, this process's rows of it."""

    @staticmethod
    def forward(ctx: Any, rows: torch.Tensor, sizes: list[int]) -> torch.Tensor:
        ctx.sizes, ctx.rank = sizes, dist.get_rank()
        longest = max(sizes)
        padded = rows.new_zeros((longest, *rows.shape[1:]))
        padded[: rows.size(0)] = rows
        parts = [torch.empty_like(padded) for _ in sizes]
        dist.all_gather(parts, padded.contiguous())
        return torch.cat([part[:n] for part, n in zip(parts, sizes)])

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        grad = grad.contiguous().clone()
        dist.all_reduce(grad)  # every process's loss reads every process's rows
        start = sum(ctx.sizes[: ctx.rank])
        return grad[start: start + ctx.sizes[ctx.rank]], None


def gather_rows(rows: torch.Tensor, contribute: bool = True) -> tuple[torch.Tensor, int]:
    """(every process's ``rows`` concatenated in rank order, the offset of this process's rows in it).

    ``contribute=False``: this process joins the collectives but adds no rows (a stand-in micro-batch of
    a rank without samples in a short last update: its text is another rank's sample)."""
    local = rows if contribute else rows[:0]
    size = torch.tensor([local.size(0)], dtype=torch.long, device=rows.device)
    sizes = [torch.zeros_like(size) for _ in range(world_size())]
    dist.all_gather(sizes, size)
    counts = [int(s.item()) for s in sizes]
    return _GatherRows.apply(local, counts), sum(counts[: dist.get_rank()])
