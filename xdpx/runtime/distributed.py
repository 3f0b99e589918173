"""One process per device under torchrun (or Slurm via torchrun); a no-op with a single process.

torchrun sets RANK / WORLD_SIZE / LOCAL_RANK; the process group uses gloo for CPU tensors and NCCL for
CUDA tensors. Gradients are summed over ranks by DDP (which averages: the loop multiplies by
world_size), and the update's sample size is summed with :func:`all_reduce_sum`, so N processes make the
same update as one process with the N-times-larger batch (invariant 8 of docs/architecture.md).

The process group lives as long as the process: it is created by the first run that needs it and kept
for every later run of a loop or a command chain, then destroyed at exit. Creating it a second time on
torchrun's store is what hung chains under torchrun: the new group's rendezvous keys have the same names
as the old group's, so a rank that arrives first can read its peer's stale address from the previous
group and wait for a connection that never comes. Between two runs the ranks meet at a barrier instead,
so no rank starts a run (its checks read save_dir) while rank 0 still writes the previous one or already
replaces the next one (overwrite).
"""

from __future__ import annotations

import atexit
import gc
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from xdpx.optim.bmuf import BlockSync


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


def launched() -> bool:
    """Whether this process is one of several started by a launcher (torchrun, x-train's own launch)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def init_process_group() -> None:
    """Create the job's process group once (gloo for CPU tensors, NCCL for CUDA tensors when there are
    GPUs); a later call is a barrier: every rank has finished what it did before."""
    if not launched():
        return
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
        return
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        backend = "cpu:gloo,cuda:nccl"
    else:
        backend = "gloo"
    torch.distributed.init_process_group(backend)
    atexit.register(_destroy_at_exit)


def _destroy_at_exit() -> None:
    # No barrier here: after a failure on one rank the others never reach it, and torchrun stops them.
    if torch.distributed.is_initialized():
        gc.collect()  # DDP models must be gone before the group (gloo aborts otherwise)
        torch.distributed.destroy_process_group()


def setup(cpu: bool) -> Context:
    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = torch.cuda.is_available() and not cpu
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    init_process_group()
    return Context(rank, world_size, local_rank, device)


def all_reduce_sum(values: list[float], context: Context) -> list[float]:
    if not context.distributed:
        return values
    tensor = torch.tensor(values, dtype=torch.float64, device=context.device)
    torch.distributed.all_reduce(tensor)
    return tensor.tolist()


def all_reduce_gradients(parameters: list[torch.nn.Parameter], context: Context) -> None:
    """Average the gradients over ranks, as DDP does in backward (a parameter without a gradient on a
    rank counts as zeros there). Used where the sync must wait until every rank's backward succeeded."""
    if not context.distributed:
        return
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in parameters]
    flat = torch.cat([g.reshape(-1) for g in grads]).div_(context.world_size)
    torch.distributed.all_reduce(flat)
    offset = 0
    for p, g in zip(parameters, grads):
        n = g.numel()
        p.grad = flat[offset: offset + n].view_as(p).clone()
        offset += n


def all_gather_objects(value: Any, context: Context) -> list[Any]:
    """``value`` of every rank, in rank order (pickled: for small results such as evaluation outputs)."""
    if not context.distributed:
        return [value]
    gathered: list[Any] = [None] * context.world_size
    torch.distributed.all_gather_object(gathered, value)
    return gathered


def barrier(context: Context) -> None:
    if context.distributed:
        torch.distributed.barrier()


def teardown(context: Context) -> None:
    """The end of a run: the caller has dropped its DDP model and optimizer; every rank waits here until
    all have finished the run (rank 0's last writes included). The process group stays for the next run
    and is destroyed at exit."""
    gc.collect()
    if context.distributed and torch.distributed.is_initialized():
        torch.distributed.barrier()


def block_sync(args: Any, module: torch.nn.Module, optimizer: Any, context: Context,
               state: dict[str, Any] | None, say: Any) -> Any:
    """BMUF's per-process state (xdpx/optim/bmuf.py) with ``use_bmuf`` and several processes, else None;
    ``say`` (the run's log) hears whether BMUF is on, and each block sync."""
    if not args.get("use_bmuf"):
        return None
    if not context.distributed:
        say("use_bmuf: one process, so BMUF is off (it merges the models of several processes)")
        return None

    say(f"use_bmuf: BMUF is on: {context.world_size} processes each train their own copy and sync every "
        f"{args.global_sync_iter} updates (block_momentum {args.block_momentum}, block_lr {args.block_lr}"
        f"{', Nesterov' if args.use_nbm else ''}), after {args.warmup_iterations} warmup updates; "
        "every evaluation is a sync too")
    sync = BlockSync(args, module, optimizer, context.world_size, say)
    if state is not None and state.get("bmuf"):
        sync.load_state_dict(state["bmuf"])
    return sync


def current() -> Context:
    """The context of x-eval / x-pred: the process group when launched, the CPU otherwise (inference
    chooses its own device)."""
    init_process_group()
    return Context(int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1")),
                   int(os.environ.get("LOCAL_RANK", "0")))


def on_main_process(work: Callable[[], Any]) -> Any:
    """Run ``work`` on rank 0 only (a command written for one process, e.g. x-prepro, in a chain under
    torchrun); the other ranks wait until it is done."""
    init_process_group()
    result = work() if int(os.environ.get("RANK", "0")) == 0 else None
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
    return result
