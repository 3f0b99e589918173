"""x-serve SAVE_DIR: predictions from a run directory, interactively or over HTTP (docs/inference.md).

    x-serve runs/a                      # type lines in the training format; `quit` ends
    x-serve runs/a --port 8080          # POST /predict, GET /health /ready /metrics /openapi.json

An input is a line in the run's training format (one text, or a pair as its parser and loader read it;
a trailing label is ignored), or, over HTTP, a JSON list of the texts of one sample. It is encoded by the
run's own processor. The HTTP side (xdpx/serve/) is a Starlette app served by uvicorn: requests are
batched together behind a bounded queue (503 + Retry-After when full), bodies and JSON are read within
limits (413, 408, 400 with the reason), and SIGTERM drains the requests in flight before exiting 0.
"""

from __future__ import annotations

import argparse
import json
import sys
from functools import partial
from typing import Any

from xdpx.config.errors import ConfigError
from xdpx.errors import UserError
from xdpx.serve.limits import Limits
from xdpx.serve.model_thread import model_thread, run_in
from xdpx.serve.predictor import BadInput, Predictor, load_for_serving, load_predictor
from xdpx.serve.runner import serve, serve_workers

__all__ = ["BadInput", "Predictor", "load_predictor", "main", "interactive"]


def format_prediction(prediction: dict[str, Any]) -> str:
    if "score" in prediction:
        return f"score {prediction['score']:.6g}"
    if "probabilities" not in prediction:  # a task's own format (NER entities, ...): its JSON object
        return json.dumps(prediction, ensure_ascii=False)
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
    default = Limits()
    parser = argparse.ArgumentParser(
        prog="x-serve",
        description="Predict with a run directory of x-train (or an ONNX export of one), interactively\n"
                    "(one input per line in the run's training format, `quit` ends) or over HTTP with --port\n"
                    "(uvicorn + Starlette: POST /predict a JSON list of inputs; GET /health, /ready, /metrics,\n"
                    "/openapi.json, /docs; GET / is a page to try the model in a browser). See docs/inference.md.",
        epilog="example:\n  x-serve outputs/runs/reviews_cnn --port 8080\n"
               "  curl -d '[\"很好\"]' http://127.0.0.1:8080/predict      # from another terminal\n"
               "  then open http://127.0.0.1:8080/ in a browser: a page to try the model",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("save_dir", help="the run directory of x-train, an int8 model folder of x-script quantize "
                        "(served on --backend torch or onnx), or an ONNX export directory of x-script export_onnx "
                        "(checked against its run at start, served through onnxruntime when faster)")
    parser.add_argument("--checkpoint", default=None, help="a path or ${save_dir}/<best> / <last> (default: best)")
    parser.add_argument("--port", type=int, default=None, help="serve HTTP on this port (0: a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--batch_size", "--batch-size", type=int, default=None,
                        help="most samples per forward pass (default: the run's valid_batch_size)")
    parser.add_argument("--max_wait_ms", "--max-wait-ms", type=float, default=2.0,
                        help="how long the batcher waits for more requests before a forward pass; not after a pass of "
                             "one sample (one client at a time: nothing to wait for) (default %(default)s)")
    parser.add_argument("--max_tokens", "--max-tokens", type=int, default=None,
                        help="most tokens (with padding) per forward pass: the batch is sorted by length and cut "
                             "into passes that pad little (default: batch_size samples per pass)")
    parser.add_argument("--bf16", action="store_true",
                        help="forward passes under bfloat16 autocast: several times faster on CPUs with AMX; the "
                             "probabilities move (how far, on the run's samples, is printed at start)")
    parser.add_argument("--backend", choices=["torch", "onnx"], default=None,
                        help="what runs the forward passes: torch or onnx (onnxruntime), for an int8 model of x-script "
                             "quantize (its int8 ONNX model) or an ONNX export; default: the faster one (measured by "
                             "quantize, or at start for an export); a run directory of x-train runs on torch")
    parser.add_argument("--cpu", action="store_true", help="stay on the CPU even when a GPU is available")
    parser.add_argument("--raw-probs", "--raw_probs", action="store_true", dest="raw_probs",
                        help="answer the raw probabilities, not those of the run's calibration.json (x-script "
                             "calibrate); the labels are the same")
    parser.add_argument("--trust-user-dir", "--trust_user_dir", action="store_true", dest="trust_user_dir",
                        help="import the user_dir that the run's args.py names (its code runs on this machine); "
                             "without it such a run is refused")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads per process (default: torch's choice, one per core; with --workers N "
                             "give each cores/N; on a busy machine 1 is often fastest)")
    parser.add_argument("--corpus", default=None,
                        help="POST /search (a bi-encoder run, with --port): a file of texts, one a line (the first "
                             "tab-separated column; id = line number - 1, as x-script build_index), embedded at start; or "
                             "an index folder x-script build_index wrote with this run (searched, nothing embedded)")
    parser.add_argument("--reranker", default=None,
                        help="with --corpus: a cross-encoder run that reorders a query's first hits when a /search "
                             "request asks {\"rerank\": N}")
    parser.add_argument("--rerank-weight", "--rerank_weight", type=float, default=1.0, dest="rerank_weight",
                        metavar="W",
                        help="with --reranker: the reranker's share w of a reranked order, in [0, 1]: hits ordered "
                             "by w * minmax(reranker scores) + (1 - w) * minmax(cosines) over the reranked ones "
                             "(default %(default)s: the reranker's order alone; 0: the cosines')")
    limits = parser.add_argument_group("limits (each broken limit is a 4xx answer naming it)")
    limits.add_argument("--max_queue", type=int, default=2048,
                        help="samples waiting or being predicted; beyond, 503 with Retry-After (default %(default)s)")
    limits.add_argument("--max_connections", type=int, default=1024,
                        help="open connections; beyond, uvicorn answers 503 (default %(default)s)")
    limits.add_argument("--max_body_bytes", type=int, default=default.max_body_bytes, help="largest body; 413 beyond (default %(default)s)")
    limits.add_argument("--max_inputs", type=int, default=default.max_inputs, help="most inputs per request (default %(default)s)")
    limits.add_argument("--max_text_chars", type=int, default=default.max_text_chars, help="most characters per text (default %(default)s)")
    limits.add_argument("--header_timeout", type=float, default=10.0,
                        help="seconds for a request's line and headers to arrive (from the connection's opening or "
                             "the request's first byte); 408 and the connection closed beyond (default %(default)s)")
    limits.add_argument("--body_timeout", type=float, default=default.body_timeout,
                        help="seconds for the body to arrive; 408 beyond (default %(default)s)")
    parser.add_argument("--drain_timeout", type=float, default=30.0,
                        help="on SIGTERM, seconds to finish the requests in flight before giving up on them (default %(default)s)")
    parser.add_argument("--workers", type=int, default=1,
                        help="worker processes, each with its own copy of the model, sharing the port (default %(default)s)")
    # A mistyped flag is named, before argparse would report only the missing SAVE_DIR or take it for one.
    flags = parser._option_string_actions
    for word in argv:
        if word.startswith("-") and len(word) > 1 and not word[1:2].isdigit() and word.split("=")[0] not in flags \
                and not any(flag.startswith(word.split("=")[0]) for flag in flags if flag.startswith("--")):
            parser.error(f"unknown flag {word!r} (a SAVE_DIR that starts with '-' is written ./{word})")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """``x-serve SAVE_DIR [--port N] [--host H] ...``."""
    options = parse_args(sys.argv[1:] if argv is None else argv)
    if options.max_inputs > options.max_queue:
        print(f"x-serve: error: --max_inputs {options.max_inputs} is over --max_queue {options.max_queue}: "
              "such a request could never be queued", file=sys.stderr)
        return 2
    problem = search_flags_problem(options)
    if problem:
        print(f"x-serve: error: {problem}", file=sys.stderr)
        return 2
    if options.port is not None and options.workers > 1:
        return _serve_workers(options)

    # HTTP: the model is loaded in the thread that will run its forward passes (xdpx/serve/model_thread.py);
    # interactive: everything in this thread
    executor = model_thread() if options.port is not None else None
    load = (options.save_dir, options.checkpoint, options.batch_size, options.cpu, options.threads,
            options.max_tokens, options.bf16, options.trust_user_dir, options.raw_probs)
    try:
        serving = partial(load_for_serving, backend=options.backend)
        predictor = run_in(executor, serving, *load) if executor else serving(*load)
    except (ConfigError, UserError, BadInput) as e:
        if executor:
            executor.shutdown()
        print(f"x-serve: error: {e}", file=sys.stderr)
        return 2 if isinstance(e, ConfigError) else 1
    searcher = None
    if options.corpus is not None:  # POST /search: the corpus embedded (and the reranker loaded) now
        # lazy: the search module loads numpy and the reranker's code; only with --corpus
        from xdpx.serve.search import load_searcher

        try:
            searcher = run_in(executor, load_searcher, predictor, options.corpus, options.reranker, options.batch_size,
                              options.rerank_weight)
        except (ConfigError, UserError) as e:
            executor.shutdown()
            print(f"x-serve: error: {e}", file=sys.stderr)
            return 2 if isinstance(e, ConfigError) else 1
    if executor is None:
        interactive(predictor)
        return 0
    from xdpx.serve.app import create_app  # lazy: loads starlette, prometheus_client

    app = create_app(predictor, _limits(options), options.batch_size, options.max_wait_ms / 1000, options.max_queue,
                     executor, searcher=searcher)
    code = serve(app, options.host, options.port, options.max_connections, options.drain_timeout,
                 announce=options.save_dir, header_timeout=options.header_timeout)
    answered = app.state.answered
    print(f"x-serve: stopped; answered {answered} prediction request{'' if answered == 1 else 's'}", file=sys.stderr,
          flush=True)
    return code


def search_flags_problem(options: argparse.Namespace) -> str | None:
    """Why --corpus / --reranker / --rerank-weight cannot be served as given (None when they can)."""
    if options.reranker is not None and options.corpus is None:
        return "--reranker reorders the hits of POST /search: give --corpus TEXTS too"
    if not 0.0 <= options.rerank_weight <= 1.0:  # NaN fails both comparisons
        return f"--rerank-weight must be in [0, 1] (the reranker's share of the order), got {options.rerank_weight}"
    if options.rerank_weight != 1.0 and options.reranker is None:
        return "--rerank-weight weighs the reranker's scores against the cosines: give --reranker RUN too"
    if options.corpus is not None and options.port is None:
        return "--corpus serves POST /search over HTTP: give --port"
    if options.corpus is not None and options.workers > 1:
        return "--corpus is served by one worker process (each would embed the corpus): use --workers 1"
    return None


def _limits(options: argparse.Namespace) -> Any:
    return Limits(max_body_bytes=options.max_body_bytes, max_inputs=options.max_inputs,
                  max_text_chars=options.max_text_chars, body_timeout=options.body_timeout)


def _serve_workers(options: argparse.Namespace) -> int:
    settings = {"save_dir": options.save_dir, "checkpoint": options.checkpoint, "batch_size": options.batch_size,
                "backend": options.backend,
                "cpu": options.cpu, "threads": options.threads, "max_tokens": options.max_tokens, "bf16": options.bf16, "max_wait": options.max_wait_ms / 1000, "max_queue": options.max_queue,
                "trust_user_dir": options.trust_user_dir, "raw_probs": options.raw_probs, "limits": _limits(options)}
    return serve_workers(settings, options.workers, options.host, options.port, options.max_connections,
                         options.drain_timeout, announce=options.save_dir, header_timeout=options.header_timeout)


if __name__ == "__main__":
    sys.exit(main())
