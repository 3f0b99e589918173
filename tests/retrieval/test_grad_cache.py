"""info_nce's mini_batch_size (gradient caching, xdpx/losses/grad_cache.py): the loss and the gradients of the
whole batch in chunks; dropout masks replayed; the training RNG unchanged after the step; a run stopped by
kill -9 resumes bitwise; the config errors."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
import torch
from retrieval_helpers import run_killable, train_config
from torch import nn

from tests.train.train_helpers import assert_same_weights, final_weights
from xdpx.losses import losses
from xdpx.losses.grad_cache import cached_embeddings, split_net_input


class TwoTowers(nn.Module):
    """A tiny bi-encoder with dropout: tokens1 / tokens2 -> [B, 2, D] (mean of embeddings, a linear map)."""

    def __init__(self, dropout: float) -> None:
        super().__init__()
        self.embedding = nn.Embedding(50, 16, padding_idx=0)
        self.dropout = nn.Dropout(dropout)
        self.linear = nn.Linear(16, 8)

    def encode(self, ids: torch.Tensor) -> torch.Tensor:
        mask = ids.ne(0).unsqueeze(-1).float()
        pooled = (self.embedding(ids) * mask).sum(1) / mask.sum(1).clamp(min=1)
        return self.linear(self.dropout(pooled))

    def forward(self, tokens1: torch.Tensor, tokens2: torch.Tensor) -> torch.Tensor:
        return torch.stack([self.encode(tokens1), self.encode(tokens2)], dim=1)


class Options(dict):
    """The few options info_nce reads, with the attribute access of resolved Args."""

    __getattr__ = dict.__getitem__


def info_nce(mini_batch_size: int | None) -> Any:
    return losses.get("info_nce")(Options(temperature=0.05, symmetric=True, mini_batch_size=mini_batch_size,
                                          loader="pair", recall_at=[1]))


def batch(size: int = 12) -> dict[str, Any]:
    generator = torch.Generator().manual_seed(3)
    tokens = torch.randint(1, 50, (2, size, 7), generator=generator)
    tokens[:, :, 5:] = 0  # padding, as a collated batch has
    return {"net_input": {"tokens1": tokens[0], "tokens2": tokens[1]}, "target": torch.zeros(size)}


def loss_and_grads(model: nn.Module, loss: Any, data: dict[str, Any], seed: int = 0) -> tuple[float, list[torch.Tensor]]:
    model.zero_grad()
    torch.manual_seed(seed)
    value, size, _ = loss(model, data)
    (value * 0.25).backward()  # the trainer's loss_scale / update sample size reaches the chunks' backward
    return float(value), [p.grad.clone() for p in model.parameters()]


def test_the_cached_loss_and_gradients_are_the_whole_batchs() -> None:
    torch.manual_seed(0)
    model, data = TwoTowers(dropout=0.0), batch()
    plain, plain_grads = loss_and_grads(model, info_nce(None), data)
    for chunk in (1, 5, 12, 100):  # uneven chunks, one chunk, a chunk larger than the batch
        cached, cached_grads = loss_and_grads(model, info_nce(chunk), data)
        assert cached == pytest.approx(plain, rel=1e-6, abs=1e-6), chunk
        for a, b in zip(plain_grads, cached_grads):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_dropout_masks_are_replayed_and_the_step_rng_continues_as_after_the_first_passes() -> None:
    torch.manual_seed(0)
    model, data = TwoTowers(dropout=0.5), batch()
    # the reference: the same chunks forwarded with a graph, in order, under the same seed (the masks the
    # cached loss's first passes draw); its gradient is what the replayed chunks must give
    model.zero_grad()
    torch.manual_seed(7)
    chunks = split_net_input(data["net_input"], 5)
    embeddings = torch.cat([model(**chunk) for chunk in chunks])
    reference = info_nce(None).scores(embeddings, data["target"])
    between_reference = torch.rand(2)  # random numbers drawn between the forward and the backward
    (reference * 0.25).backward()
    after_reference = torch.rand(3)
    reference_grads = [p.grad.clone() for p in model.parameters()]

    model.zero_grad()
    torch.manual_seed(7)
    value, _, _ = info_nce(5)(model, data)
    assert torch.equal(torch.rand(2), between_reference)
    (value * 0.25).backward()
    assert float(value) == pytest.approx(float(reference), rel=1e-6)
    for a, b in zip(reference_grads, [p.grad for p in model.parameters()]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # the replays drew from a forked RNG: the step goes on with the numbers it would have had without them
    assert torch.equal(torch.rand(3), after_reference)


def test_without_gradients_it_is_one_plain_forward() -> None:
    model, data = TwoTowers(dropout=0.0).eval(), batch()
    with torch.no_grad():
        cached = cached_embeddings(model, data["net_input"], 5)
        assert cached.grad_fn is None and torch.equal(cached, model(**data["net_input"]))


def test_kill_during_cached_training_then_resume_is_bitwise(retrieval_data: Path, tmp_path: Path) -> None:
    (tmp_path / "reference").mkdir()
    (tmp_path / "killed").mkdir()
    short = {"mini_batch_size": 6, "max_epoch": 1, "eval_interval": 3}  # 7 updates: a test's budget
    reference = train_config(tmp_path / "reference", retrieval_data, **short)
    assert run_killable(reference) == 0
    config = train_config(tmp_path / "killed", retrieval_data, **short)
    assert run_killable(config, "update", 5) == -signal.SIGKILL
    assert run_killable(config) == 0
    assert_same_weights(final_weights(tmp_path / "killed/run"), final_weights(tmp_path / "reference/run"))
    assert (tmp_path / "killed/run/valid.log.tsv").read_text() == (tmp_path / "reference/run/valid.log.tsv").read_text()
