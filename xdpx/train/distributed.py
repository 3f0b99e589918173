"""One process per device under torchrun (or Slurm via torchrun); a no-op with a single process.

torchrun sets RANK / WORLD_SIZE / LOCAL_RANK; the process group uses NCCL on GPUs and gloo on CPUs.
Gradients are summed over ranks by DDP (which averages: the loop multiplies by world_size), and the
update's sample size is summed with :func:`all_reduce_sum`, so N processes make the same update as one
process with the N-times-larger batch (DESIGN invariant 8).
"""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass

import torch


@dataclass
class Context:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def setup(cpu: bool) -> Context:
    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = torch.cuda.is_available() and not cpu
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    if world_size > 1 and not torch.distributed.is_initialized():
        torch.distributed.init_process_group("nccl" if use_cuda else "gloo")
    return Context(rank, world_size, local_rank, device)


def all_reduce_sum(values: list[float], context: Context) -> list[float]:
    if not context.distributed:
        return values
    tensor = torch.tensor(values, dtype=torch.float64, device=context.device)
    torch.distributed.all_reduce(tensor)
    return tensor.tolist()


def barrier(context: Context) -> None:
    if context.distributed:
        torch.distributed.barrier()


def teardown(context: Context) -> None:
    """Destroy the process group; the caller has dropped its DDP model and optimizer (gloo aborts at exit
    when the group goes while a DDP model still exists)."""
    gc.collect()
    if context.distributed and torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
