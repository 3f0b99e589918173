"""info_nce with gather_negatives on two processes (torchrun, gloo on the CPU); test_gather_negatives.py
compares what each rank computes with one process holding the whole batch.

    python -m torch.distributed.run --nproc_per_node=2 --standalone gather_runner.py OUT_DIR

Each rank takes the rows rank::2 of :func:`batch` (11 triplets: 6 and 5 rows), and writes OUT_DIR/rank<r>.pt:
per case its loss and the gradients summed over the ranks (what DDP's sync gives, times the world size).
Cases: ``plain``; ``cached`` (mini_batch_size 2: the gradient-cached embeddings gathered); ``stand_in``
(rank 1 holds a stand-in micro-batch, rank 0 the whole batch).
"""

from __future__ import annotations

import sys
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from xdpx.losses import losses

SIZE = 11


class ThreeTowers(nn.Module):
    """A tiny bi-encoder: tokens1..3 -> [B, K, D] (mean of embeddings, a linear map)."""

    def __init__(self) -> None:
        super().__init__()
        with torch.random.fork_rng():  # the same weights in every process, the caller's random state untouched
            torch.manual_seed(0)
            self.embedding = nn.Embedding(50, 16, padding_idx=0)
            self.linear = nn.Linear(16, 8)

    def encode(self, ids: torch.Tensor) -> torch.Tensor:
        mask = ids.ne(0).unsqueeze(-1).float()
        return self.linear((self.embedding(ids) * mask).sum(1) / mask.sum(1).clamp(min=1))

    def forward(self, **fields: torch.Tensor) -> torch.Tensor:
        return torch.stack([self.encode(fields[name]) for name in ("tokens1", "tokens2", "tokens3")], dim=1)


class Options(dict):
    """The few options info_nce reads, with the attribute access of resolved Args."""

    __getattr__ = dict.__getitem__


def info_nce(gather: bool, mini_batch_size: int | None = None) -> Any:
    return losses.get("info_nce")(Options(temperature=0.05, symmetric=True, mini_batch_size=mini_batch_size,
                                          gather_negatives=gather, loader="triplet", recall_at=[1]))


def batch(rows: slice | list[int] = slice(None)) -> dict[str, Any]:
    generator = torch.Generator().manual_seed(3)
    tokens = torch.randint(1, 50, (3, SIZE, 7), generator=generator)
    tokens[:, :, 5:] = 0
    return {"net_input": {f"tokens{i + 1}": tokens[i][rows] for i in range(3)}, "target": torch.zeros(SIZE)[rows]}


def loss_and_grads(model: nn.Module, loss: Any, data: dict[str, Any]) -> tuple[float, list[torch.Tensor]]:
    model.zero_grad()
    value, _size, _logs = loss(model, data)
    value.backward()
    return float(value.detach()), [p.grad.clone() for p in model.parameters()]


def main(out_dir: str) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model, results = ThreeTowers(), {}
    mine = batch(slice(rank, None, 2))
    for name, loss, data in (("plain", info_nce(True), mine), ("cached", info_nce(True, 2), mine),
                             ("stand_in", info_nce(True), batch() if rank == 0 else {**batch([0]), "stand_in": True})):
        value, grads = loss_and_grads(model, loss, data)
        for grad in grads:
            dist.all_reduce(grad)
        results[name] = {"loss": value, "grads": grads}
    torch.save(results, f"{out_dir}/rank{rank}.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
