"""x-serve SAVE_DIR: predictions from a run directory, interactively or over HTTP (docs/inference.md).

    x-serve runs/a                      # type lines in the training format; `quit` ends
    x-serve runs/a --port 8080          # POST /predict, GET /health on 127.0.0.1:8080

An input is a line in the run's training format (one text, or a pair as its parser and loader read it;
a trailing label is ignored), or, over HTTP, a JSON list of the texts of one sample. It is encoded by the
run's own processor. HTTP requests are batched together: a worker thread gathers the samples of the
requests waiting (up to batch_size samples, or max_wait_ms) and predicts them in one forward pass.
A bad request gets a 400 with the reason; the server keeps serving.
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BODY_BYTES = 8 << 20
MAX_INPUTS = 4096


class BadInput(ValueError):
    """An input that cannot become a sample (the message says which and why)."""


class Predictor:
    """Inputs -> predictions with a loaded run (xdpx.inference.loading.LoadedModel)."""

    def __init__(self, loaded: Any) -> None:
        from xdpx.data import loaders, parsers
        from xdpx.inference.outputs import PredictionFormat

        self.loaded = loaded
        run_args = loaded.run_args
        self.parser = parsers.get(run_args.parser)(run_args)
        self.loader = loaders.get(run_args.loader)(run_args)
        processor = loaded.processor
        if processor.is_corpus:
            raise BadInput(f"processor {run_args.processor!r} (language model) has no per-line predictions to serve")
        self.labels = processor.target_map.labels if processor.target_map is not None else []
        self.format = PredictionFormat(self.labels, loaded.regression, distill=False)
        self.lock = threading.Lock()

    def encode(self, item: Any) -> dict[str, Any]:
        """A sample from a line of the training format (str) or the list of a sample's texts."""
        from xdpx.data.errors import BadLine

        processor = self.loaded.processor
        try:
            if isinstance(item, str):
                columns = self.parser.parse(item.rstrip("\r\n"))
                texts, _label = self.loader.fields(columns, self.loader.layout_of(columns))
            elif isinstance(item, list) and all(isinstance(t, str) for t in item):
                if len(item) != processor.num_texts:
                    raise BadLine(f"expected {processor.num_texts} text(s), got {len(item)}")
                texts = [t.strip() for t in item]
                if not all(texts):
                    raise BadLine("empty text")
            else:
                raise BadLine(f"an input is a string (a line in the training format) or a list of "
                              f"{processor.num_texts} string(s), got {type(item).__name__}")
            sample = processor.encode(texts)
        except BadLine as e:
            raise BadInput(str(e)) from None
        if any(len(sample[f]) == 0 for f in processor.fields):
            raise BadInput("no tokens left after tokenization")
        return sample

    def predict_samples(self, samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from xdpx.inference.outputs import probabilities
        from xdpx.inference.scoring import predict_logits

        loaded = self.loaded
        with self.lock:  # one forward pass at a time: the model's threads already use the cores
            logits = predict_logits(loaded.task, loaded.model, loaded.processor, samples, loaded.batch_size,
                                    loaded.autocast, loaded.to_device).numpy()
        values = probabilities(logits, loaded.regression)
        if loaded.regression:
            return [{"score": float(v)} for v in values]
        out = []
        for row in values:
            best = int(row.argmax())
            out.append({"label": self.labels[best], "prob": float(row[best]),
                        "probabilities": {label: float(p) for label, p in zip(self.labels, row)}})
        return out


class Batcher:
    """Gathers the samples of concurrent requests into shared forward passes (one worker thread)."""

    def __init__(self, predictor: Predictor, batch_size: int, max_wait: float) -> None:
        self.predictor, self.batch_size, self.max_wait = predictor, batch_size, max_wait
        self.requests: queue.Queue[Any] = queue.Queue()
        self.thread = threading.Thread(target=self._work, name="x-serve-batcher", daemon=True)
        self.thread.start()

    def predict(self, samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        job = {"samples": samples, "done": threading.Event(), "result": None, "error": None}
        self.requests.put(job)
        job["done"].wait()
        if job["error"] is not None:
            raise job["error"]
        return job["result"]

    def _work(self) -> None:
        while True:
            jobs = [self.requests.get()]
            count = len(jobs[0]["samples"])
            deadline = time.monotonic() + self.max_wait
            while count < self.batch_size:
                try:
                    job = self.requests.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                jobs.append(job)
                count += len(job["samples"])
            try:
                results = self.predictor.predict_samples([s for job in jobs for s in job["samples"]])
                start = 0
                for job in jobs:
                    job["result"] = results[start: start + len(job["samples"])]
                    start += len(job["samples"])
            except Exception as e:  # reported to every request of the batch; the worker goes on
                for job in jobs:
                    job["error"] = e
            for job in jobs:
                job["done"].set()


def make_handler(predictor: Predictor, batcher: Batcher, info: dict[str, Any]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "x-serve"
        protocol_version = "HTTP/1.1"
        timeout = 60  # seconds a connection may stay silent (a body shorter than its Content-Length...)

        def _send(self, status: int, payload: Any) -> None:
            body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _error(self, status: int, message: str) -> None:
            self._send(status, {"error": message})

        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            if self.path.split("?")[0] == "/health":
                self._send(200, {"status": "ok", **info})
            else:
                self._error(404, f"no such path {self.path!r}: use GET /health or POST /predict")

        def do_POST(self) -> None:  # noqa: N802
            if self.path.split("?")[0] != "/predict":
                self._drain()
                self._error(404, f"no such path {self.path!r}: use POST /predict")
                return
            length_header = self.headers.get("Content-Length")
            if length_header is None or not length_header.isdigit():
                self.close_connection = True
                self._error(411 if length_header is None else 400, "send the JSON body with a Content-Length header")
                return
            length = int(length_header)
            if length > MAX_BODY_BYTES:
                self.close_connection = True
                self._error(413, f"the body has {length} bytes; at most {MAX_BODY_BYTES}")
                return
            try:
                inputs = json.loads(self.rfile.read(length).decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                self._error(400, f"the body is not JSON: {e}")
                return
            if not isinstance(inputs, list) or not inputs:
                self._error(400, 'send a non-empty JSON list of inputs, e.g. ["a text", "another text"]')
                return
            if len(inputs) > MAX_INPUTS:
                self._error(400, f"{len(inputs)} inputs in one request; at most {MAX_INPUTS}")
                return
            samples = []
            for index, item in enumerate(inputs):
                try:
                    samples.append(predictor.encode(item))
                except BadInput as e:
                    self._error(400, f"input {index}: {e}")
                    return
            try:
                self._send(200, batcher.predict(samples))
            except Exception as e:  # the model failed: say so, keep serving
                self._error(500, f"prediction failed: {type(e).__name__}: {e}")

        def _drain(self) -> None:
            length = self.headers.get("Content-Length")
            if length and length.isdigit() and int(length) <= MAX_BODY_BYTES:
                self.rfile.read(int(length))
            else:
                self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the stdlib's signature)
            pass  # one line per request would drown the console; errors reach the client

    return Handler


def make_server(predictor: Predictor, host: str = "127.0.0.1", port: int = 0, batch_size: int | None = None,
                max_wait: float = 0.002) -> ThreadingHTTPServer:
    """A ThreadingHTTPServer (not started) serving ``predictor``; port 0 picks a free port."""
    loaded = predictor.loaded
    batcher = Batcher(predictor, batch_size or loaded.batch_size, max_wait)
    info = {"model": loaded.run_args.model, "checkpoint": loaded.checkpoint, "labels": predictor.labels}
    server = ThreadingHTTPServer((host, port), make_handler(predictor, batcher, info))
    server.daemon_threads = True
    return server


def format_prediction(prediction: dict[str, Any]) -> str:
    if "score" in prediction:
        return f"score {prediction['score']:.6g}"
    others = ", ".join(f"{k}: {v:.4f}" for k, v in prediction["probabilities"].items())
    return f"{prediction['label']}\t{prediction['prob']:.4f}\t({others})"


def interactive(predictor: Predictor, lines: Any = None, out: Any = None) -> None:
    """Read inputs line by line, print each prediction; ``quit`` (or end of input) ends."""
    lines = lines if lines is not None else sys.stdin
    out = out if out is not None else sys.stdout
    prompt = sys.stdin.isatty() and lines is sys.stdin
    while True:
        if prompt:
            out.write("> ")
            out.flush()
        line = lines.readline()
        if not line or line.strip() in ("quit", "exit"):
            return
        if not line.strip():
            continue
        try:
            prediction = predictor.predict_samples([predictor.encode(line)])[0]
            out.write(format_prediction(prediction) + "\n")
        except BadInput as e:
            out.write(f"error: {e}\n")
        out.flush()


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="x-serve", description="Predict with a run directory, interactively "
                                     "(one input per line, `quit` ends) or over HTTP (--port).")
    parser.add_argument("save_dir", help="the run directory of x-train")
    parser.add_argument("--checkpoint", default=None, help="a path or ${save_dir}/<best> / <last> (default: best)")
    parser.add_argument("--port", type=int, default=None, help="serve HTTP on this port (0: a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--batch_size", "--batch-size", type=int, default=None,
                        help="most samples per forward pass (default: the run's valid_batch_size)")
    parser.add_argument("--max_wait_ms", "--max-wait-ms", type=float, default=2.0,
                        help="how long the batcher waits for more requests before a forward pass")
    parser.add_argument("--cpu", action="store_true", help="stay on the CPU even when a GPU is available")
    return parser.parse_args(argv)


def load_predictor(save_dir: str, checkpoint: str | None = None, batch_size: int | None = None,
                   cpu: bool = False) -> Predictor:
    from xdpx.command import COMMON_OPTIONS
    from xdpx.config.options import resolve
    from xdpx.inference.loading import load_model
    from xdpx.inference.options import LOAD_OPTIONS

    config: dict[str, Any] = {"save_dir": save_dir, "checkpoint": checkpoint, "batch_size": batch_size}
    if cpu:
        config["cuda"] = False
    args = resolve({k: v for k, v in config.items() if v is not None}, COMMON_OPTIONS + LOAD_OPTIONS, "serve",
                   origin="x-serve")
    return Predictor(load_model(args, say=lambda m: print(m, file=sys.stderr)))


def main(argv: list[str] | None = None) -> int:
    """``x-serve SAVE_DIR [--port N] [--host H] ...``."""
    from xdpx.cli import UserError
    from xdpx.config.errors import ConfigError

    options = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        predictor = load_predictor(options.save_dir, options.checkpoint, options.batch_size, options.cpu)
    except (ConfigError, UserError, BadInput) as e:
        print(f"x-serve: error: {e}", file=sys.stderr)
        return 2 if isinstance(e, ConfigError) else 1
    if options.port is None:
        interactive(predictor)
        return 0
    server = make_server(predictor, options.host, options.port, options.batch_size, options.max_wait_ms / 1000)
    host, port = server.server_address[:2]
    print(f"x-serve: serving {options.save_dir} on http://{host}:{port} (POST /predict, GET /health)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
