"""Dropout whose mask is cheap to draw on the CPU.

torch's CPU dropout draws its mask with ``bernoulli_``, one mt19937 draw converted to a double per
element: on MiniLM (hidden 384, 13 hidden and 6 attention dropouts an update) that was 10-11% of a
bf16 update (torch.profiler, issue 18), more than the attention's matmuls. Here one 32-bit draw
(``random_`` on int32: uniform on [0, 2^31)) gives two 15-bit uniform numbers, and an element is kept
when its number is at least ``round(p * 2^15)``: the mask costs a quarter of the draws and no float
conversion (the mask alone: ~1.3 ms against ~8.5 ms for 418k elements, one thread).

The drop probability is ``p`` rounded to a multiple of 2^-15 (0.1 -> 0.100006) and kept elements are
scaled by the inverse of the real keep probability, so the expectation is exact as in torch's dropout.
The masks come from torch's CPU generator: seeding, ``fork_rng``, activation checkpointing's RNG
restore and resume behave as with ``nn.Dropout``. On other devices (CUDA has a fused Philox kernel) and
inside torch.compile (inductor draws its own Philox numbers in the fused kernel) it is torch's dropout.
"""

from __future__ import annotations

import functools

import torch
from torch import nn
from torch.nn import functional as F

from xdpx.models.modules.capture import capturing_graph

_BITS = 15
_LEVELS = 1 << _BITS


def dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """``F.dropout(x, p, training)`` with the CPU mask drawn as described in the module's docstring."""
    if not training or p == 0.0:
        return x
    if not _draws_own_mask(x, p):
        return F.dropout(x, p, True)
    return x * dropout_mask(x, p)


def _draws_own_mask(x: torch.Tensor, p: float) -> bool:
    """Whether xdpx draws the mask itself: a CPU tensor outside graph capture, 0 < p < 1, and p at least
    2^-16 (below that nothing would ever be dropped at 15-bit resolution); else it is torch's dropout."""
    return x.device.type == "cpu" and 0.0 < p < 1.0 and not capturing_graph() and round(p * _LEVELS) > 0


def dropout_mask(x: torch.Tensor, p: float) -> torch.Tensor:
    """The scaled mask (0 or 1 / keep probability, in x's dtype) that :func:`dropout` multiplies a CPU
    tensor like ``x`` by, from the same draws: ``x * dropout_mask(x, p)`` is ``dropout(x, p)`` bit for bit
    when both start from the same generator state. For code that needs the mask again in its backward."""
    if not _draws_own_mask(x, p):
        return F.dropout(torch.ones_like(x), p, True)
    dropped = round(p * _LEVELS)
    n = x.numel()
    # int32 random_ covers [0, 2^31): the low int16 half is 16 random bits, the high one 15 (its sign
    # bit is 0); keeping 15 bits of each gives two uniform numbers on [0, 2^15) per draw
    uniform = torch.empty((n + 1) // 2, dtype=torch.int32).random_().view(torch.int16)[:n].bitwise_and_(_LEVELS - 1)
    scale = _LEVELS / (_LEVELS - dropped)
    # the mask in x's dtype, like torch's dropout (its noise tensor is x's dtype too): the 0/1 integers,
    # widened to x's width, times the bits of the scale in x's dtype are the scaled mask's bits. Every
    # float path (a cast and a multiply, or torch.where of two scalars) took more passes or slower ones:
    # a [32, 27, 384] fp32 mask took 946 us with torch.where against 497 us this way, one thread
    mask = uniform.ge_(dropped)
    if x.dtype.itemsize != 2:
        mask = mask.to(_SAME_WIDTH[x.dtype.itemsize])
    return mask.mul_(_bits_of(scale, x.dtype)).view(x.dtype).view(x.shape)


_SAME_WIDTH = {2: torch.int16, 4: torch.int32, 8: torch.int64}  # float width -> integer of that width


@functools.lru_cache(maxsize=64)
def _bits_of(value: float, dtype: torch.dtype) -> int:
    """The integer whose bits are ``value`` rounded to the float ``dtype`` (a positive float's bits are a
    positive integer of the same width): one integer multiply of the 0/1 mask then gives the scaled mask
    directly, bit for bit what a cast and a float multiply give, without those two passes (0.53 -> 0.45 ms
    for a [32, 27, 384] bf16 dropout, one thread)."""
    return int(torch.tensor(value, dtype=dtype).view(_SAME_WIDTH[dtype.itemsize]))


class Dropout(nn.Dropout):
    """``nn.Dropout`` with :func:`dropout`'s cheaper CPU mask (same options, no state)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.inplace:
            return super().forward(x)
        return dropout(x, self.p, self.training)
