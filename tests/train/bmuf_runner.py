"""Run under torchrun (2 processes): BMUF (xdpx.optim.bmuf.BlockSync) against a one-process simulation of
both processes, for each ``BLOCK_MOMENTUM,BLOCK_LR,NESTEROV`` argument
(``python bmuf_runner.py 0,1,0 0.5,0.7,1``); exits 1 on a mismatch."""

from __future__ import annotations

import copy
import sys
from types import SimpleNamespace

import torch

from xdpx.optim.bmuf import BlockSync
from xdpx.runtime import distributed

UPDATES, INTERVAL, WORLD = 10, 3, 2


def data(rank: int, update: int) -> torch.Tensor:
    return torch.randn(5, 4, generator=torch.Generator().manual_seed(1000 * rank + update))


def local_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, rank: int, update: int) -> None:
    optimizer.zero_grad()
    (model(data(rank, update)) - 1.0).pow(2).mean().backward()
    optimizer.step()


def check(momentum: float, block_lr: float, nesterov: bool, rank: int) -> float:
    torch.manual_seed(0)
    initial = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    model = copy.deepcopy(initial)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    args = SimpleNamespace(block_lr=block_lr, block_momentum=momentum, global_sync_iter=INTERVAL, warmup_iterations=0,
                           use_nbm=nesterov, average_sync=False)
    sync = BlockSync(args, model, optimizer, WORLD)
    for update in range(1, UPDATES + 1):
        local_step(model, optimizer, rank, update)
        sync.after_update(update)

    # the same in one process: both copies, and the block update written out with plain tensors
    models = [copy.deepcopy(initial) for _ in range(WORLD)]
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in models]
    global_weights = [p.detach().clone() for p in initial.parameters()]
    delta = [torch.zeros_like(p) for p in global_weights]
    for update in range(1, UPDATES + 1):
        for r in range(WORLD):
            local_step(models[r], optimizers[r], r, update)
        if update % INTERVAL == 0:
            with torch.no_grad():
                for i, weights in enumerate(zip(*(m.parameters() for m in models))):
                    if momentum == 0 and block_lr == 1:  # the claim: plain model averaging
                        merged = sum(w for w in weights) / WORLD
                    else:
                        descent = sum(global_weights[i] - w for w in weights) / WORLD
                        delta[i] = momentum * delta[i] + block_lr * descent
                        global_weights[i] = global_weights[i] - delta[i]
                        merged = global_weights[i] - (momentum * delta[i] if nesterov else 0)
                    for w in weights:
                        w.copy_(merged)
    expected = list(models[rank].parameters())
    return max(float((a - b).abs().max()) for a, b in zip(model.parameters(), expected))


distributed.init_process_group()
rank = torch.distributed.get_rank()
failed = False
for case in sys.argv[1:]:
    momentum, block_lr, nesterov = case.split(",")
    worst = check(float(momentum), float(block_lr), nesterov == "1", rank)
    print(f"rank {rank}, case {case}: largest difference {worst:.3g}")
    failed |= not worst < 1e-6
sys.exit(1 if failed else 0)
