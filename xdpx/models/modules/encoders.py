"""Sequence encoders and feed-forward blocks shared by the CNN, matching and RE2 models.

Convolutions use 'same' padding and zero the padded positions of their input, so the value at a real
position is what the same sentence gives alone in a batch: padding never leaks into real outputs.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class SameConv1d(nn.Conv1d):
    """A 1-D convolution whose output has the input's length, for odd and even kernel sizes alike.

    The zero padding is explicit (left (k-1)//2, right k//2, as torch's padding='same'), which avoids the
    copy and the warning torch's own 'same' mode has for even kernels.
    """

    def __init__(self, in_dim: int, out_dim: int, kernel_size: int) -> None:
        super().__init__(in_dim, out_dim, kernel_size)
        self.same_padding = ((kernel_size - 1) // 2, kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(F.pad(x, self.same_padding))


def split_width(total: int, parts: int) -> list[int]:
    """``total`` channels shared among ``parts`` convolutions (the first ones take the remainder)."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


class MultiKernelConv(nn.Module):
    """Parallel 1-D convolutions of several kernel sizes, concatenated along the channels."""

    def __init__(self, in_dim: int, out_dim: int, kernel_sizes: list[int]) -> None:
        super().__init__()
        widths = split_width(out_dim, len(kernel_sizes))
        self.convs = nn.ModuleList(
            SameConv1d(in_dim, width, kernel) for width, kernel in zip(widths, kernel_sizes)
        )

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``x [B, L, in_dim]`` -> ``[B, L, out_dim]``, before any activation."""
        x = x.masked_fill(~mask.unsqueeze(-1), 0.0).transpose(1, 2)  # zeros, as outside the sentence
        return torch.cat([conv(x) for conv in self.convs], dim=1).transpose(1, 2)


class ConvEncoder(nn.Module):
    """A stack of ``num_layers`` × (dropout, multi-kernel convolution, GeLU); padded positions are zero."""

    def __init__(self, in_dim: int, hidden_size: int, kernel_sizes: list[int], num_layers: int,
                 dropout: float) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            MultiKernelConv(in_dim if i == 0 else hidden_size, hidden_size, kernel_sizes) for i in range(num_layers)
        )
        self.out_dim = hidden_size

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = F.gelu(layer(self.dropout(x), mask))
        return x.masked_fill(~mask.unsqueeze(-1), 0.0)


class FeedForward(nn.Module):
    """Dropout, linear, GeLU: the single-layer network RE2 uses for alignment and fusion."""

    def __init__(self, in_dim: int, out_dim: int, dropout: float) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.linear = nn.Linear(in_dim, out_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(self.dropout(x)))


class PredictionHead(nn.Module):
    """Features -> logits: a hidden GeLU layer then a linear layer, with dropout before each."""

    def __init__(self, in_dim: int, hidden_size: int, num_outputs: int, dropout: float) -> None:
        super().__init__()
        self.hidden = FeedForward(in_dim, hidden_size, dropout)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden_size, num_outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.dropout(self.hidden(x)))
