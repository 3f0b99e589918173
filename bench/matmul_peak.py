"""The matmul peak the BERT benches divide by, and the encoder's matrix products at a batch's shapes.

A single square product (2048^3) is not the fastest shape on every CPU: the model's own products were
measured at 103-110% of it. So the peak is the best rate over a set of shapes that includes the
model's own (every product of a forward and backward at the batches' shapes) and the square one, each
shape timed after warm-up and rated by its fastest timing. Any set of these products, timed the same
way, then runs at or below the peak: a "share of peak" above 100% would mean a timing faster than the
best one seen for that shape.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

Shape = tuple[int, int, int, int]  # (batch, m, k, n): batch products of [m, k] x [k, n]
SQUARE: Shape = (1, 2048, 2048, 2048)


def matmul_shapes(rows: int, length: int, model: Any) -> list[Shape]:
    """(batch, m, k, n) of every matrix product of one forward and backward of our BERT's encoder."""
    bert = model.bert
    hidden = bert.embeddings.word_embeddings.embedding_dim
    inter = bert.encoder.layer[0].intermediate.dense.out_features
    heads = bert.encoder.layer[0].attention.self.heads
    head = hidden // heads
    n = rows * length
    forward = [(1, n, hidden, 3 * hidden), (rows * heads, length, head, length), (rows * heads, length, length, head),
               (1, n, hidden, hidden), (1, n, hidden, inter), (1, n, inter, hidden)]
    layers = [forward] * len(bert.encoder.layer)
    if model.reads_first_token_only():  # the last layer: keys and values of every token, the rest for [CLS]
        layers[-1] = [(1, n, hidden, 2 * hidden), (1, rows, hidden, hidden), (rows * heads, 1, head, length),
                      (rows * heads, 1, length, head), (1, rows, hidden, hidden), (1, rows, hidden, inter),
                      (1, rows, inter, hidden)]
    shapes = []
    for b, m, k, nn_ in (s for layer in layers for s in layer):  # y = x w: forward, dx = dy w^T, dw = x^T dy
        shapes += [(b, m, k, nn_), (b, m, nn_, k), (b, k, m, nn_)]
    return shapes


def _product(a: Any, w: Any) -> Any:
    import torch

    return torch.bmm(a, w) if a.size(0) > 1 else torch.mm(a[0], w[0])


def time_matmuls(shapes: list[Shape], dtype: Any, device: Any = None) -> float:
    """Seconds for the products of ``shapes`` on random operands (made before the clock starts)."""
    import torch

    operands = [(torch.randn(b, m, k, dtype=dtype, device=device), torch.randn(b, k, n, dtype=dtype, device=device))
                for b, m, k, n in shapes]
    _sync(device)
    start = time.perf_counter()
    for a, w in operands:
        _product(a, w)
    _sync(device)
    return time.perf_counter() - start


def _sync(device: Any) -> None:
    import torch

    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def matmul_peak(device: Any, dtype: Any, shapes: Sequence[Shape] = (), repeats: int = 10,
                warmup: int = 3) -> tuple[float, Shape, dict[Shape, float]]:
    """(peak FLOP/s, the shape that reached it, every shape's best FLOP/s) over ``SQUARE`` and ``shapes``
    (duplicates timed once): ``warmup`` untimed runs of a shape, then ``repeats`` timings, the fastest kept."""
    import torch

    best: dict[Shape, float] = {}
    for shape in dict.fromkeys([SQUARE, *shapes]):
        b, m, k, n = shape
        a = torch.randn(b, m, k, device=device, dtype=dtype)
        w = torch.randn(b, k, n, device=device, dtype=dtype)
        fastest = float("inf")
        for i in range(warmup + repeats):
            _sync(device)
            start = time.perf_counter()
            _product(a, w)
            _sync(device)
            if i >= warmup:
                fastest = min(fastest, time.perf_counter() - start)
        best[shape] = 2 * b * m * k * n / fastest
    top = max(best, key=best.__getitem__)
    return best[top], top, best


def model_shapes(batches: Sequence[tuple[int, int]], model: Any) -> list[Shape]:
    """The distinct products of our BERT's forward and backward at each (rows, padded length)."""
    return list(dict.fromkeys(s for rows, length in dict.fromkeys(batches) for s in matmul_shapes(rows, length, model)))


def describe(peak: float, top: Shape, best: dict[Shape, float]) -> str:
    """One line for the output: the peak, its shape, the square product's rate, how many shapes."""
    return (f"matmul peak {peak / 1e9:.0f} GFLOP/s at (batch, m, k, n) {top}, best timing of each of "
            f"{len(best)} shapes (the model's and 2048^3; 2048^3 alone: {best[SQUARE] / 1e9:.0f})")
