"""BMUF: blockwise model-update filtering (Chen & Huo, ICASSP 2016), on torch.distributed.

With ``use_bmuf: true`` the processes do not sync gradients at every update. Each trains its own copy
of the model on its share of every update group for a *block* of ``global_sync_iter`` updates; then the
block's average descent ``G = mean over ranks (w_global - w_local)`` is filtered with block momentum::

    delta    = block_momentum * delta + block_lr * G
    w_global = w_global - delta
    w_local  = w_global                               (classical block momentum)
    w_local  = w_global - block_momentum * delta      (Nesterov: use_nbm)

and every process continues from the same weights. With block_momentum 0 and block_lr 1 this is model
averaging every global_sync_iter updates. Until ``warmup_iterations`` the processes train independently;
at that update rank 0's weights are broadcast and the optimizer state restarts (or is averaged with
``average_sync``). An evaluation is also a block boundary, so every process evaluates and saves the same
model. fairseq's FairseqBMUF (and the original XDPX's) served as the reference for the options.
Each sync is counted and timed: with ``say`` (x-train's log) every block sync writes a line to log.txt
with its number, update and seconds, so a slow interconnect shows up there.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from xdpx.config.options import Option
from xdpx.config.ranges import above, at_least, in_range

BMUF_OPTIONS: list[Any] = [
    Option("block_lr", float, default=1.0, validate=above(0),
           doc="BMUF block learning rate: the step along the block's averaged descent"),
    Option("block_momentum", float, default=0.875, validate=in_range(0, 1, high_open=True),
           doc="BMUF block momentum (0: plain model averaging when block_lr is 1)"),
    Option("global_sync_iter", int, default=50, validate=at_least(1),
           doc="BMUF: updates per block (between two syncs of the processes' models)"),
    Option("warmup_iterations", int, default=500, validate=at_least(0),
           doc="BMUF: updates trained independently before rank 0's weights are broadcast and block syncs start"),
    Option("use_nbm", bool, default=False, doc="BMUF: Nesterov block momentum instead of the classical one"),
    Option("average_sync", bool, default=False,
           doc="BMUF: average the optimizer state (e.g. Adam's moments) over the processes at each sync; "
               "otherwise each process keeps its own (and restarts it at the warmup broadcast)"),
]


class BlockSync:
    """The BMUF state of one process; the trainer calls :meth:`after_update` after every optimizer step
    and :meth:`sync` before an evaluation."""

    def __init__(self, args: Any, module: Any, optimizer: Any, world_size: int,
                 say: Callable[[str], None] | None = None) -> None:
        self.module, self.optimizer, self.world_size = module, optimizer, world_size
        self.block_lr, self.block_momentum = args.block_lr, args.block_momentum
        self.sync_interval, self.warmup = args.global_sync_iter, args.warmup_iterations
        self.nesterov, self.average_sync = args.use_nbm, args.average_sync
        self.params = [p for p in module.parameters() if p.requires_grad]
        with torch.no_grad():
            self.global_params = [p.detach().clone() for p in self.params]
        self.delta = [torch.zeros_like(p) for p in self.params]
        self.initial_optimizer_state = optimizer.state_dict()
        self.last_sync = 0
        self.syncs = 0  # block syncs so far (the warmup broadcast included), for the log
        self.say = say

    def after_update(self, num_updates: int) -> None:
        """``num_updates``: the updates done, this one included."""
        if num_updates == self.warmup and self.warmup > 0:
            self._warmup_sync(num_updates)
        elif num_updates > self.warmup and num_updates % self.sync_interval == 0:
            self.sync(num_updates)

    def sync(self, num_updates: int) -> None:
        """A block boundary (a no-op when this update was one already)."""
        if num_updates == self.last_sync:
            return
        self.last_sync = num_updates
        started = time.perf_counter()
        with torch.no_grad():
            # the block's descent of this process, averaged over the processes in one flat all-reduce
            descent = torch.cat([(g - p).reshape(-1) for g, p in zip(self.global_params, self.params)])
            dist.all_reduce(descent.div_(self.world_size))
            offset = 0
            for p, g, d in zip(self.params, self.global_params, self.delta):
                n = p.numel()
                d.mul_(self.block_momentum).add_(descent[offset: offset + n].view_as(p), alpha=self.block_lr)
                g.sub_(d)
                p.copy_(g)
                if self.nesterov:
                    p.sub_(d, alpha=self.block_momentum)
                offset += n
        if self.average_sync:
            self._average_optimizer_state()
        self._log("block sync", num_updates, started)

    def _warmup_sync(self, num_updates: int) -> None:
        started = time.perf_counter()
        with torch.no_grad():
            for p, g in zip(self.params, self.global_params):
                dist.broadcast(p.data, src=0)
                g.copy_(p)
        if self.average_sync:
            self._average_optimizer_state()
        else:
            self.optimizer.load_state_dict(self.initial_optimizer_state)
        self.last_sync = num_updates
        self._log("warmup broadcast of rank 0's weights", num_updates, started)

    def _log(self, what: str, num_updates: int, started: float) -> None:
        self.syncs += 1
        if self.say is not None:
            self.say(f"BMUF: {what}, sync {self.syncs}, at update {num_updates}: "
                     f"{time.perf_counter() - started:.3f}s")

    def _average_optimizer_state(self) -> None:
        for state in self.optimizer.state.values():
            for value in state.values():
                if torch.is_tensor(value) and value.is_floating_point() and value.dim() > 0:
                    dist.all_reduce(value.div_(self.world_size))

    def state_dict(self) -> dict[str, Any]:
        return {"global_params": [g.clone() for g in self.global_params], "delta": [d.clone() for d in self.delta],
                "last_sync": self.last_sync, "syncs": self.syncs}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        with torch.no_grad():
            for mine, saved in zip(self.global_params + self.delta, state["global_params"] + state["delta"]):
                mine.copy_(saved)
        self.last_sync = state["last_sync"]
        self.syncs = state.get("syncs", 0)  # states saved before syncs were counted
