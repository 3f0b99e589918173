"""Cost of token attributions (docs/benchmarks.md, "Token attributions"): Integrated Gradients of 1,000
English polarity sentences through a fine-tuned all-MiniLM-L6-v2 run (bert_classification).

    python bench/bench_explain.py --save-dir outputs/runs/polarity_minilm [--sentences 1000] [--steps 50 16]
        [--threads 2]

The sentences are the first ``--sentences`` of examples/data/full/polarity (test, dev, then train; written
by examples/prepare_data.py) that fit the run's max_len. For each ``--steps`` value it prints the time, sentences/s and how well the
attributions add up: |delta| / |output - baseline output| (median and 95th percentile over the sentences).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def sentences(count: int) -> list[str]:
    found: list[str] = []
    for split in ("test", "dev", "train"):
        with open(os.path.join(ROOT, "examples/data/full/polarity", f"{split}.txt"), encoding="utf-8") as f:
            for line in f:
                text = line.rstrip("\n").split("\t")[-1]
                if text.strip():
                    found.append(text)
    if len(found) < count:
        sys.exit(f"only {len(found)} polarity sentences: run python examples/prepare_data.py --sets polarity")
    return found[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--save-dir", default="outputs/runs/polarity_minilm")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--steps", type=int, nargs="+", default=[50, 16])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import torch

    from xdpx.command import COMMON_OPTIONS
    from xdpx.config.options import resolve
    from xdpx.inference.explain import explain_texts
    from xdpx.inference.loading import load_model
    from xdpx.inference.options import LOAD_OPTIONS

    torch.set_num_threads(args.threads)
    options = resolve({"save_dir": args.save_dir, "cuda": False}, COMMON_OPTIONS + LOAD_OPTIONS, "bench", origin="bench")
    loaded = load_model(options)
    # sentences over the run's max_len are refused by explain (their cut tokens would get no share)
    processor = loaded.processor
    texts = [t for t in sentences(args.sentences + 200) if not processor.numerize_batch([[t]])[0][1]]
    texts = texts[: args.sentences]
    explain_texts(loaded, [[t] for t in texts[:8]], n_steps=4)  # warm-up
    for steps in args.steps:
        started = time.perf_counter()
        explained = explain_texts(loaded, [[t] for t in texts], n_steps=steps)
        seconds = time.perf_counter() - started
        gaps = sorted(abs(p.delta) / max(abs(p.output - p.baseline_output), 1e-9) for (p,) in explained)
        print(f"n_steps {steps}: {len(texts)} sentences in {seconds:.1f} s ({len(texts) / seconds:.1f}/s, "
              f"{1000 * seconds / len(texts):.0f} ms each); |delta| / |output difference|: median "
              f"{statistics.median(gaps):.4f}, p95 {gaps[int(0.95 * (len(gaps) - 1))]:.4f}", flush=True)


if __name__ == "__main__":
    main()
