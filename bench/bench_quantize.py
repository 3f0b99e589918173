"""int8 against float32 on the MiniLM teacher (docs/distill.md, "int8"): x-script quantize's measurement and
x-serve's speed of the three, side by side.

    sh examples/distill/run.sh               # at least its first step: outputs/distill/runs/teacher_minilm
    python bench/bench_quantize.py [--run outputs/distill/runs/teacher_minilm] [--seconds 8] [--repeats 2]

Steps: :func:`xdpx.export.quantize.quantize_run` on the run's best checkpoint (``--tolerance`` 100, so the
int8 model is always written and measured; the table says what it loses), dev accuracy of float32, int8 torch
and int8 onnx as x-eval loads them (quantize.json), size on disk (the float32 checkpoint, model_int8.safetensors,
model_int8.onnx), then three x-serve processes at once (the run; the int8 folder with ``--backend torch``; with
``--backend onnx``; each ``--batch_size 64``, its libraries' default threads) under bench/bench_serve.py's
keep-alive clients, one test sentence per request: requests/s at ``--clients`` (64) and the p50 of one client,
the measurements alternating between the servers, the best of ``--repeats`` kept (``--threads N``: every server
with OMP_NUM_THREADS=N). The int8 folder is kept under ``--work`` and reused while the run's best checkpoint is
older (``--requantize`` writes it again). The CPU, its int8 features
(avx512_vnni, amx) and the load average are printed at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

TEACHER = "outputs/distill/runs/teacher_minilm"


def cpu_features() -> str:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    found = [flag for flag in flags if flag in ("avx512_vnni", "avx_vnni") or flag.startswith("amx")]
    return ", ".join(found) or "no VNNI / AMX"


def quantized(run: str, work: str, tolerance: float, requantize: bool) -> tuple[str, dict[str, Any]]:
    from xdpx.export.quantize import REPORT, quantize_run

    out = os.path.join(work, os.path.basename(run.rstrip("/")) + "_int8")
    with open(os.path.join(run, "checkpoints.json"), encoding="utf-8") as f:
        best = os.path.join(run, json.load(f)["best"])
    report_file = os.path.join(out, REPORT)
    # written once, again when the run has a newer best checkpoint (or --requantize)
    if requantize or not os.path.exists(report_file) or os.path.getmtime(report_file) < os.path.getmtime(best):
        quantize_run(run, out, split="dev", tolerance=tolerance)
    with open(report_file, encoding="utf-8") as f:
        return out, json.load(f)


def serving(servers: dict[str, list[str]], texts: list[str], options: argparse.Namespace) -> dict[str, dict[str, float]]:
    """requests/s at --clients and the p50 of one client per server (best of --repeats, alternating)."""
    from bench_serve import load, start, stop

    serve = [sys.executable, "-c", "from xdpx.cli import x_serve; x_serve()"]
    running: dict[str, tuple[subprocess.Popen, tuple[str, int]]] = {}
    best = {name: {"rps": 0.0, "p50": float("inf")} for name in servers}
    try:
        for i, (name, args) in enumerate(servers.items()):
            running[name] = start([*serve, *args, "--port", "0", "--cpu", "--batch_size", "64"], options.threads,
                                  os.path.join(options.work, f"serve_{i}.log"))
        for _ in range(options.repeats):
            for name, (_process, address) in running.items():
                many = load(address, texts, options.clients, options.seconds, options.warmup)
                one = load(address, texts, 1, options.seconds, options.warmup)
                assert many["errors"] == 0 and one["errors"] == 0, (name, many, one)
                best[name]["rps"] = max(best[name]["rps"], many["rps"])
                best[name]["p50"] = min(best[name]["p50"], one["p50"])
                print(f"  {name}: {many['rps']:.1f} req/s at {options.clients} clients, p50 {one['p50']:.2f} ms alone",
                      flush=True)
    finally:
        for process, _address in running.values():
            stop(process)
    return best


def main() -> None:
    from bench_serve import cpu_model

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", default=TEACHER, help="the float32 run (default: the distillation teacher)")
    parser.add_argument("--work", default=os.path.join(ROOT, "outputs", "bench_quantize"))
    parser.add_argument("--tolerance", type=float, default=100.0)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0,
                        help="OMP_NUM_THREADS of every server (0: each library's default, one per core)")
    parser.add_argument("--requantize", action="store_true", help="quantize again even when the folder is current")
    options = parser.parse_args()
    run = os.path.join(ROOT, options.run)
    if not os.path.exists(os.path.join(run, "checkpoints.json")):
        raise SystemExit(f"no finished run at {options.run}: run examples/distill/run.sh first")
    os.makedirs(options.work, exist_ok=True)
    print(f"CPU: {cpu_model()} ({cpu_features()}), {os.cpu_count()} cores; load average {os.getloadavg()}", flush=True)
    folder, report = quantized(run, options.work, options.tolerance, options.requantize)
    with open(os.path.join(ROOT, "examples/data/full/polarity/test.txt"), encoding="utf-8") as f:
        texts = [line.rstrip("\n").split("\t")[1] for line in f]
    speed = serving({"fp32": [run], "int8 torch": [folder, "--backend", "torch"],
                     "int8 onnx": [folder, "--backend", "onnx"]}, texts, options)
    print(f"\nload average {os.getloadavg()}\n")
    print(f"| MiniLM teacher | dev accuracy | x-serve req/s at {options.clients} clients | single-request p50 | "
          "size on disk | largest probability difference |")
    print("| --- | --- | --- | --- | --- | --- |")
    base = speed["fp32"]["rps"]
    for name, key in (("fp32", "fp32"), ("int8 torch", "int8_torch"), ("int8 onnx", "int8_onnx")):
        row, size = report[key], report["size_bytes"][key]
        difference = f"{row['max_probability_difference']:.3g}" if key != "fp32" else "-"
        lost = f" ({-row['loss_points']:+.2f} points)" if key != "fp32" else ""
        print(f"| {name} | {row['accuracy']:.2%}{lost} | {speed[name]['rps']:.1f} ({speed[name]['rps'] / base:.2f}x) | "
              f"{speed[name]['p50']:.1f} ms | {size / 1e6:.1f} MB ({report['size_bytes']['fp32'] / size:.2f}x smaller) | "
              f"{difference} |")


if __name__ == "__main__":
    main()
