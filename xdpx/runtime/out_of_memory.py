"""Out-of-memory errors, told apart from the others: auto_ga's trigger in training and in evaluation.

With auto_ga an out-of-memory error halves the batch and the work is done again from the same data. The
training update (xdpx/train/loop.py) halves ``batch_size`` and doubles the update's micro-batches;
the evaluation (xdpx/train/evaluation.py) halves ``valid_batch_size``. With several processes the error
reaches every rank first (the loop's sums over ranks, xdpx/runtime/scoring.py's gather), so that all of
them halve and start again together.
"""

from __future__ import annotations

import torch


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is an out-of-memory error of torch (a device's or the CPU allocator's)."""
    return isinstance(error, torch.OutOfMemoryError) or (
        isinstance(error, RuntimeError) and "out of memory" in str(error).lower())
