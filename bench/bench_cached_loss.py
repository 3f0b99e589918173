"""Gradient caching (info_nce's mini_batch_size): peak memory of a batch of 256 in chunks of 32 against a plain
batch of 32 (today's memory; and 32 x update_freq 8, today's way to 256 samples an update, whose negatives are
still 32) and a plain batch of 256, and the loss of the first update of both runs with in-batch negatives of 256.

    python bench/bench_cached_loss.py [--epochs 1] [--repeats 2]

Every run trains the same samples (whole epochs of the training split): a run's peak memory depends on the longest
batch it meets, so a comparison over a few updates of different batch sizes compares different samples (3 updates
of 32 never meet the 64-token batch that the first update of 256 holds).

Real data and model: the STS-B retrieval pairs (outputs/data/stsb_retrieval_bert, from
examples/retrieval/prepro_retrieval_bert.hjson) and all-MiniLM-L6-v2 (outputs/pretrained/all-MiniLM-L6-v2, see
examples/bert/link_minilm.sh), as examples/retrieval/train_retrieval_minilm.hjson trains it. Each run is a real
``x-train`` in a process of its own (dropout 0, so both 256 runs see the same network function): its peak RSS
is the kernel's (``os.wait4``), the loss of update 1 and samples/s come from its train.log.tsv. The runs of a
repeat alternate, so machine load hits all three alike; the table gives the median over repeats.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "outputs/data/stsb_retrieval_bert"
MODEL = REPO / "outputs/pretrained/all-MiniLM-L6-v2"
CASES = {  # name -> (batch_size, mini_batch_size, update_freq)
    "batch 32": (32, None, 1),
    "batch 32, update_freq 8": (32, None, 8),  # 256 samples an update today, negatives from 32
    "batch 256, mini_batch_size 32": (256, 32, 1),
    "batch 256": (256, None, 1),
}


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def run(root: Path, name: str, batch_size: int, chunk: int | None, update_freq: int, epochs: int) -> dict[str, float]:
    save_dir = root / name.replace(" ", "_").replace(",", "")
    config = {"__parent__": str(REPO / "examples/retrieval/train_retrieval_minilm"), "save_dir": str(save_dir),
              "batch_size": batch_size, "mini_batch_size": chunk, "update_freq": update_freq, "max_update": None,
              "max_epoch": epochs,
              "valid_batch_size": 32, "log_interval": 1, "eval_interval": 10**6, "hidden_dropout_prob": 0.0,
              "attention_probs_dropout_prob": 0.0, "save_best_only": True, "save_last_only": True}
    path = root / f"{save_dir.name}.json"
    path.write_text(json.dumps(config))
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", "from xdpx.cli import x_train; x_train()", str(path)],
                               cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"{name}: x-train failed:\n{process.stderr.read()[-3000:]}")
    with open(save_dir / "train.log.tsv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return {"peak_mib": usage.ru_maxrss / 1024, "loss1": float(rows[0]["loss"]),
            "samples_per_s": statistics.median(float(r["samples_per_s"]) for r in rows[1:] or rows),
            "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
    options = parser.parse_args()
    for needed in (DATA / "meta.hjson", MODEL):
        if not needed.exists():
            raise SystemExit(f"{needed} is missing: see this file's docstring")
    results: dict[str, list[dict[str, float]]] = {name: [] for name in CASES}
    with tempfile.TemporaryDirectory(prefix="xdpx-bench-cache-") as tmp:
        for repeat in range(options.repeats):
            for name, (batch_size, chunk, update_freq) in CASES.items():
                root = Path(tmp) / f"r{repeat}"
                root.mkdir(exist_ok=True)
                results[name].append(run(root, name, batch_size, chunk, update_freq, options.epochs))
                print(f"repeat {repeat + 1} {name}: {results[name][-1]}", file=sys.stderr, flush=True)
    base = statistics.median(r["peak_mib"] for r in results["batch 32"])
    print(f"\n{time.strftime('%Y-%m-%d %H:%M')}, {cpu_name()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; "
          f"MiniLM-L6 bi-encoder on STS-B retrieval pairs (max_len 64), {options.epochs} epoch(s) on every side, "
          f"{options.repeats} repeats (median)\n")
    print("| run | peak RSS (MiB) | vs batch 32 | loss of update 1 | samples/s |")
    print("| --- | --- | --- | --- | --- |")
    for name, rows in results.items():
        peak = statistics.median(r["peak_mib"] for r in rows)
        losses = sorted({r["loss1"] for r in rows})
        print(f"| {name} | {peak:.0f} | {peak / base:.2f}x | {', '.join(f'{v:.6g}' for v in losses)} | "
              f"{statistics.median(r['samples_per_s'] for r in rows):.1f} |")
    cached = statistics.median(r["loss1"] for r in results["batch 256, mini_batch_size 32"])
    plain = statistics.median(r["loss1"] for r in results["batch 256"])
    print(f"\n|loss(cached) - loss(plain)| at batch 256: {abs(cached - plain):.2g} (goal <= 1e-4; train.log.tsv "
          "keeps 6 significant digits)")


if __name__ == "__main__":
    main()
