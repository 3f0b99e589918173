"""Where a MiniLM fine-tuning update spends its time, outside any trainer: the ceiling of bench_bert.py.

    python bench/bench_bert_parts.py [--threads 1] [--precision fp32 bf16] [--updates 40] [--probes]

On x-train's own batches (batch 32, max_len 128, English polarity, padded to the longest sample) it times,
for each precision, in one process, with the parts alternating batch by batch:

- ``matmuls only``: the encoder's matrix products of each batch and nothing else (forward: QKV, attention
  scores and values, attention output, the two feed-forward products; backward: two products for each
  of them), in the autocast dtype, on random tensors of the batch's shapes;
- ``forward + backward``: our BERT (bert_classification) with its loss, no optimizer (dropout on);
- ``forward + backward, no dropout``: the same in eval mode (no dropout; autograd still on; fp32 attention
  without dropout runs as SDPA's fused kernel, see xdpx/models/bert_layers.py ``written_out_is_faster``);
- ``update``: forward + backward + clip + fused AdamW step, as the hand loop of bench_bert.py;
- with ``--probes``, cost probes (not training): ``forward + backward`` with one part removed (GELU as
  the identity, LayerNorm as the identity, the word embeddings frozen, no dropout), so that the median
  of the paired differences (same batch, timed one after the other) is what that part costs inside a
  real update, caches and allocator included. torch.profiler attributes time per op but distorts it:
  it put 16-17 ms (fp32, one thread) on zeroing the word-embedding gradient.

Each line gives ms per update (median over the batches), model GFLOP/s (bench_bert.py's count: 6 x matmul
parameters x padded tokens plus attention) and its share of the matmul peak measured in the same process:
the best rate over 2048^3 and the model's own products at five of the timed batches' shapes
(bench/matmul_peak.py), so ``matmuls only`` stays at or under 100%. The gap between ``matmuls only`` and the peak is what the matrix sizes cost;
the gap between ``matmuls only`` and ``update`` is the non-matmul work.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.bench_bert import (  # noqa: E402
    LR,
    build_model,
    cpu_description,
    load_average,
    make_args,
    peak_for,
    prepare_data,
    shapes_of,
    xtrain_batches,
)
from bench.matmul_peak import matmul_shapes, time_matmuls  # noqa: E402


def removed(model: Any, part: str) -> contextlib.ExitStack:
    """``model`` with ``part`` taken out for one forward and backward (a cost probe, not training): GELU
    and LayerNorm become the identity (an instance attribute shadows LayerNorm's forward), the word
    embeddings are frozen; everything is restored when the ``with`` block ends."""
    from unittest import mock

    from torch import nn

    def identity(x: Any) -> Any:
        return x

    stack = contextlib.ExitStack()
    if part == "gelu":
        for layer in model.bert.encoder.layer:
            stack.enter_context(mock.patch.object(layer.intermediate, "act", identity))
    elif part == "layernorm":
        for m in model.modules():
            if isinstance(m, nn.LayerNorm):
                stack.enter_context(mock.patch.object(m, "forward", identity))
    elif part == "word embeddings' gradient":
        weight = model.bert.embeddings.word_embeddings.weight
        weight.requires_grad_(False)
        stack.callback(weight.requires_grad_, True)
    else:
        raise ValueError(part)
    return stack


def measure(precision: str, data_dir: str, folder: str, updates: int, probes: bool = False) -> None:
    """Time the parts of one precision, alternating batch by batch, and print their table."""
    import torch
    import torch.nn.functional as F

    bf16 = precision == "bf16"
    dtype = torch.bfloat16 if bf16 else torch.float32
    args = make_args(data_dir, os.path.join(folder, f"run-{precision}"), 1, bf16)
    batches = xtrain_batches(args, 1)[: updates + 3]
    model = build_model(args, False, torch.device("cpu"))
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0, fused=True)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()

    def forward_backward(batch: dict[str, Any], train: bool) -> None:
        model.train(train)
        optimizer.zero_grad(set_to_none=True)
        with autocast:
            loss = F.cross_entropy(model(**batch["net_input"]).float(), batch["target"])
        loss.backward()

    def without(part: str) -> Any:
        def run(batch: dict[str, Any]) -> None:
            with removed(model, part):
                forward_backward(batch, True)
        return run

    def update(batch: dict[str, Any]) -> None:
        forward_backward(batch, True)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()

    def timed(run: Any) -> Any:
        def part(batch: dict[str, Any]) -> float:
            start = time.perf_counter()
            run(batch)
            return time.perf_counter() - start
        return part

    parts = {
        "matmuls only": lambda b: time_matmuls(matmul_shapes(*b["net_input"]["input_ids"].shape, model), dtype),
        "forward + backward": timed(lambda b: forward_backward(b, True)),
        "forward + backward, no dropout": timed(lambda b: forward_backward(b, False)),
        "update (+ clip + fused AdamW)": timed(update),
    }
    probed = ["gelu", "layernorm", "word embeddings' gradient"] if probes else []
    for part in probed:
        parts[f"forward + backward without {part} (probe)"] = timed(without(part))
    times: dict[str, list[float]] = {name: [] for name in parts}
    for i, batch in enumerate(batches):
        for name, run in parts.items():
            seconds = run(batch)  # the matmuls' random operands are made before their clock starts
            if i >= 3:
                times[name].append(seconds)
    shapes = shapes_of(batches[3:])
    print(f"\n{precision}:", end=" ")
    peak = peak_for(torch.device("cpu"), dtype, shapes, model, 10)  # over 2048^3 and the model's products
    flops = shapes.flops(model, model.reads_first_token_only()) / len(shapes.batches)
    print(f"\n{precision}: {len(shapes.batches)} batches, {shapes.padded / len(shapes.batches):.0f} padded tokens per "
          f"batch, {flops / 1e9:.1f} GFLOP per update; matmul peak {peak / 1e9:.0f} GFLOP/s; load average "
          f"{load_average()}")
    print("| part | ms per update (median) | model GFLOP/s | share of matmul peak |")
    print("| --- | --- | --- | --- |")
    for name, values in times.items():
        seconds = statistics.median(values)
        print(f"| {name} | {seconds * 1e3:.1f} | {flops / seconds / 1e9:.0f} | {flops / seconds / peak:.0%} |")
    if probes:
        reference = times["forward + backward"]
        print("\n| part | its cost: median of paired differences, ms per update | quartiles |")
        print("| --- | --- | --- |")
        rows = {"dropout": times["forward + backward, no dropout"]}
        rows.update({part: times[f"forward + backward without {part} (probe)"] for part in probed})
        for part, values in rows.items():
            diffs = [(a - b) * 1e3 for a, b in zip(reference, values)]
            q1, _, q3 = statistics.quantiles(diffs, n=4)
            print(f"| {part} | {statistics.median(diffs):.1f} | {q1:.1f} to {q3:.1f} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--precision", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    parser.add_argument("--updates", type=int, default=40, help="batches timed per part (after 3 warm-up)")
    parser.add_argument("--probes", action="store_true",
                        help="also time forward + backward without GELU, LayerNorm, the word embeddings' gradient")
    options = parser.parse_args(argv)
    import torch

    from xdpx.utils.cpu_memory import keep_freed_memory

    if options.threads:
        torch.set_num_threads(options.threads)
    # x-train's CPU process setting (xdpx/utils/cpu_memory.py): without it each update page-faults the
    # 47 MB word-embedding gradient afresh, which x-train does not pay
    kept = keep_freed_memory()
    print(f"MiniLM update parts, cpu ({torch.get_num_threads()} threads), torch {torch.__version__}\n"
          f"CPU: {cpu_description()}\nglibc keeps freed memory (as in x-train): {kept}\n"
          f"load average at start: {load_average()}", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        data_dir = prepare_data(folder)
        for precision in options.precision:
            measure(precision, data_dir, folder, options.updates, options.probes)
    print(f"load average at end: {load_average()}")


if __name__ == "__main__":
    main()
