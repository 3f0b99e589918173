"""Peak memory and time of one BERT training step with and without ``gradient_checkpointing``.

    python bench/bench_checkpointing.py [--layers 6] [--hidden 384] [--batch 32] [--length 128]

A randomly initialised BERT of MiniLM-L6's shape by default (6 layers, hidden 384, 12 heads, FFN 1536,
vocabulary 30522), one forward/backward of a classification loss on a batch of full-length sequences,
dropout on. Peak memory: on CUDA ``torch.cuda.max_memory_allocated`` above the memory held before the
step; on the CPU the torch profiler's memory timeline (every allocation and free of the step, by the
profiler's own categories), its largest total. Time: the median of ``--repeats`` steps without the
profiler, the two models alternating step by step (and the per-repeat ratios). The date, CPU, threads
and load average are printed with the table.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from typing import Any

import torch

from xdpx.config.options import Option, resolve
from xdpx.models import models


def build(layers: int, hidden: int, checkpointing: bool) -> Any:
    root = [Option("vocab_size", int, default=30522), Option("pad_index", int, default=0),
            Option("num_classes", int, default=2), Option("target_type", str, default="text"),
            Option("pretrained_model", str, default=None),
            Option("model", str, default="bert_classification", registry=models)]
    args = resolve({"pretrained_model": None, "num_hidden_layers": layers, "hidden_size": hidden,
                    "num_attention_heads": 12, "intermediate_size": 4 * hidden, "gradient_checkpointing": checkpointing},
                   root, "bench")
    torch.manual_seed(0)
    return models.get("bert_classification").build(args)


def step(model: Any, inputs: dict[str, torch.Tensor], target: torch.Tensor) -> float:
    model.zero_grad(set_to_none=True)
    torch.manual_seed(1)
    loss = torch.nn.functional.cross_entropy(model(**inputs), target)
    loss.backward()
    return float(loss.detach())


def cpu_peak_bytes(model: Any, inputs: dict[str, torch.Tensor], target: torch.Tensor) -> int:
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import MemoryProfileTimeline  # what export_memory_timeline uses

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as prof:
        step(model, inputs, target)
    _times, sizes = MemoryProfileTimeline(prof._memory_profile())._coalesce_timeline(torch.device("cpu"))
    return int(max(sum(row) for row in sizes))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--hidden", type=int, default=384)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5, help="timed steps a side, the sides alternating")
    a = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    ids = torch.randint(1000, 30522, (a.batch, a.length), generator=torch.Generator().manual_seed(0)).to(device)
    inputs = {"input_ids": ids, "token_type_ids": torch.zeros_like(ids), "attention_mask": torch.ones_like(ids)}
    target = (torch.arange(a.batch) % 2).to(device)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor()) if device.type == "cpu" else torch.cuda.get_device_name()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {cpu}; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; load average {os.getloadavg()[0]:.2f}")
    print(f"device {device}; BERT {a.layers} layers, hidden {a.hidden}; batch {a.batch} x {a.length} tokens")
    sides = {c: build(a.layers, a.hidden, c).to(device).train() for c in (False, True)}
    peaks, losses, times = {}, {}, {c: [] for c in sides}
    for checkpointing, model in sides.items():
        step(model, inputs, target)  # warm-up
        if device.type == "cuda":
            torch.cuda.synchronize()
            model.zero_grad(set_to_none=True)
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            step(model, inputs, target)
            peaks[checkpointing] = torch.cuda.max_memory_allocated() - base
        else:
            peaks[checkpointing] = cpu_peak_bytes(model, inputs, target)
    for repeat in range(a.repeats):  # the sides alternate (who goes first too): load hits both alike
        for checkpointing in ((False, True) if repeat % 2 == 0 else (True, False)):
            model = sides[checkpointing]
            started = time.perf_counter()
            losses[checkpointing] = step(model, inputs, target)
            if device.type == "cuda":
                torch.cuda.synchronize()
            times[checkpointing].append(time.perf_counter() - started)
    print(f"| gradient_checkpointing | peak memory of the step (MiB) | step time (s, median of {a.repeats}) | loss |")
    print("| --- | --- | --- | --- |")
    for c in sides:
        print(f"| {str(c).lower()} | {peaks[c] / 2**20:.1f} | {statistics.median(times[c]):.3f} | {losses[c]:.6f} |")
    ratios = [t / f for f, t in zip(times[False], times[True])]
    print(f"memory {peaks[False] / peaks[True]:.2f}x less; time {statistics.median(ratios):.2f}x (median of the "
          f"per-repeat ratios {' '.join(f'{r:.2f}' for r in ratios)}); load average {os.getloadavg()[0]:.2f}")

if __name__ == "__main__":
    main()
