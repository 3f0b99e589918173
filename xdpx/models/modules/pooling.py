"""Masked pooling over the sequence axis: padding never changes the result.

``x`` is ``[B, L, D]``; ``mask`` is ``[B, L]`` bool, True at real tokens.
"""

from __future__ import annotations

import torch
from torch import nn


def masked_max(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Max over real positions; a sample without any real token pools to zeros instead of -inf."""
    filled = x.masked_fill(~mask.unsqueeze(-1), torch.finfo(x.dtype).min)
    pooled = filled.max(dim=1).values
    return pooled.masked_fill(~mask.any(dim=1, keepdim=True), 0.0)


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    weights = mask.unsqueeze(-1).to(x.dtype)
    return (x * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax where masked entries get zero weight (the finite minimum avoids NaN on empty rows)."""
    return scores.masked_fill(~mask, torch.finfo(scores.dtype).min).softmax(dim=dim)


class AttentionPooling(nn.Module):
    """A learned weighted average: ``softmax(v . tanh(W x))`` over the real positions."""

    def __init__(self, dim: int, hidden_size: int | None = None) -> None:
        super().__init__()
        hidden_size = hidden_size or dim
        self.projection = nn.Linear(dim, hidden_size)
        self.score = nn.Linear(hidden_size, 1, bias=False)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        scores = self.score(torch.tanh(self.projection(x))).squeeze(-1)  # [B, L]
        weights = masked_softmax(scores, mask, dim=1)
        return torch.einsum("bl,bld->bd", weights, x)


class Pooling(nn.Module):
    """One of 'max', 'mean' or 'attention' pooling behind a single interface."""

    def __init__(self, strategy: str, dim: int) -> None:
        super().__init__()
        if strategy not in ("max", "mean", "attention"):
            raise ValueError(f"unknown pooling {strategy!r}: choose max, mean or attention")
        self.strategy = strategy
        self.attention = AttentionPooling(dim) if strategy == "attention" else None

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.attention is not None:
            return self.attention(x, mask)
        return masked_max(x, mask) if self.strategy == "max" else masked_mean(x, mask)
