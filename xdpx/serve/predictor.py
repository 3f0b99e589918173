"""Inputs -> predictions with a run directory, through the run's own parser, loader and processor."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from xdpx.command import COMMON_OPTIONS
from xdpx.config.options import resolve
from xdpx.data import parsers
from xdpx.data.composition import build_loader
from xdpx.data.errors import BadLine
from xdpx.data.loading import check_text
from xdpx.errors import UserError
from xdpx.inference import LOAD_OPTIONS, load_model
from xdpx.models.choice import model_label
from xdpx.models.int8 import read_record


class BadInput(ValueError):
    """An input that cannot become a sample (the message says which and why)."""


class Predictor:
    """Inputs -> predictions with a loaded run (xdpx.inference.loading.LoadedModel)."""

    def __init__(self, loaded: Any, max_tokens: int | None = None) -> None:
        from xdpx.inference import prediction_format  # lazy: loads numpy

        self.loaded = loaded
        run_args = loaded.run_args
        self.parser = parsers.get(run_args.parser)(run_args)
        self.loader = build_loader(run_args)
        processor = loaded.processor
        if processor.is_corpus:
            raise BadInput(f"processor {run_args.processor!r} (language model) has no per-line predictions to serve")
        self.num_texts = processor.num_texts
        self.labels = processor.target_map.labels if processor.target_map is not None else []
        # the task's own format (NER entities, label sets, embeddings) or the class / regression columns
        self.format = prediction_format(loaded.task, None, processor.target_map.labels
                                        if processor.target_map is not None else None, loaded.regression)
        self.lock = threading.Lock()
        # a forward pass holds at most this many tokens with padding: a batch of requests is cut, by
        # length, into passes that pad little (None: batch_size samples per pass, whatever their lengths)
        self.max_tokens = max_tokens
        self.backend = "pytorch"  # or onnxruntime (xdpx.serve.onnx_backend), pytorch-bf16 (serve_in_bf16)
        # an int8 model of x-script quantize (xdpx/inference/backends.py) says so in /health and /metrics
        self.precision = getattr(loaded, "precision", "float32")
        if getattr(loaded, "backend", "torch") == "onnx":
            self.backend = "onnxruntime"
        # the run's calibration (x-script calibrate): class logits are divided by it (None: raw probabilities)
        self.temperature: float | None = None

    def describe(self) -> dict[str, Any]:
        """What /health shows: the model and the checkpoint's file name, never a filesystem path."""
        checkpoint = self.loaded.checkpoint
        return {"model": model_label(self.loaded.run_args),
                "checkpoint": os.path.basename(str(checkpoint)) if checkpoint else None,
                "labels": self.labels, "texts_per_input": self.num_texts,
                "regression": bool(self.loaded.regression), "backend": self.backend, "precision": self.precision,
                "temperature": self.temperature}

    def encode(self, item: Any) -> dict[str, Any]:
        """A sample from a line of the training format (str) or the list of a sample's texts."""
        processor = self.loaded.processor
        try:
            if isinstance(item, str) and getattr(self.parser, "text_requests", False):
                texts = [item.strip()]  # a parser of multi-line records (CoNLL): a request is the text itself
                if not texts[0]:
                    raise BadLine("empty text")
            elif isinstance(item, str):
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
            for text in texts:  # the loader checked a line's columns; a request's own strings are checked here
                check_text(text)
            sample = processor.encode(texts)
        except BadLine as e:
            raise BadInput(str(e)) from None
        if any(len(sample[f]) == 0 for f in processor.fields):
            raise BadInput("no tokens left after tokenization")
        return sample

    def predict_inputs(self, items: list[Any]) -> list[dict[str, Any] | BadInput]:
        """The prediction of each input, or the BadInput that says why it has none: x-serve's batcher
        calls it in its model thread, so that tokenizing the inputs does not hold up the event loop."""
        samples, results = [], []
        for item in items:
            try:
                samples.append(self.encode(item))
                results.append(None)
            except BadInput as e:
                results.append(e)
        predictions = iter(self.predict_samples(samples) if samples else [])
        return [next(predictions) if r is None else r for r in results]

    def predict_samples(self, samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from xdpx.runtime.scoring import predict_logits  # lazy: loads torch, numpy

        loaded = self.loaded
        with self.lock:  # one forward pass at a time: the model's threads already use the cores
            logits = predict_logits(loaded.task, loaded.model, loaded.processor, samples, loaded.batch_size,
                                    loaded.autocast, loaded.to_device, max_tokens=self.max_tokens).numpy()
        if self.temperature is not None:  # the run's calibration (x-script calibrate)
            logits = logits / self.temperature
        return self.format.records(logits, samples)


def load_predictor(save_dir: str, checkpoint: str | None = None, batch_size: int | None = None,
                   cpu: bool = False, threads: int | None = None, max_tokens: int | None = None,
                   trust_user_dir: bool = False, raw_probs: bool = False, *, backend: str | None = None) -> Predictor:
    """A Predictor for a run directory or an int8 model folder (``backend``: torch or onnx, see
    xdpx/inference/backends.py), its best checkpoint unless ``checkpoint`` says otherwise;
    ``threads``: torch's intra-op threads of this process (default: torch's choice); ``max_tokens``: see
    Predictor; ``trust_user_dir``: import the user_dir the run's args.py names (x-serve --trust-user-dir);
    the run's calibrated probabilities when it has a calibration.json for the checkpoint, unless ``raw_probs``."""
    if threads:
        import torch  # lazy: loads torch

        torch.set_num_threads(threads)

    config: dict[str, Any] = {"save_dir": save_dir, "checkpoint": checkpoint, "batch_size": batch_size,
                              "trust_user_dir": trust_user_dir, "backend": backend}
    if cpu:
        config["cuda"] = False
    args = resolve({k: v for k, v in config.items() if v is not None}, COMMON_OPTIONS + LOAD_OPTIONS, "serve",
                   origin="x-serve")

    def say(message: str) -> None:
        print(message, file=sys.stderr)

    predictor = Predictor(load_model(args, say=say), max_tokens)
    from xdpx.inference import (  # lazy: numpy; x-serve's command imports this module
        calibrates,
        run_temperature,
    )

    if calibrates(predictor.loaded):
        predictor.temperature = run_temperature(save_dir, predictor.loaded, raw=raw_probs, say=say)
    return predictor


def timed_logits(predictor: Predictor, samples: list[dict[str, Any]], model: Any = None, autocast: Any = None,
                 repeats: int = 3) -> tuple[Any, float]:
    """The logits of ``samples`` computed as the predictor's passes are (by default with its model and
    autocast), and the fastest of ``repeats`` runs in seconds: what the start-up choices compare."""
    from xdpx.runtime.scoring import predict_logits  # lazy: loads torch, numpy

    loaded = predictor.loaded
    best, logits = float("inf"), None
    for _ in range(repeats):
        started = time.perf_counter()
        logits = predict_logits(loaded.task, model if model is not None else loaded.model, loaded.processor,
                                samples, loaded.batch_size, autocast if autocast is not None else loaded.autocast,
                                loaded.to_device, max_tokens=predictor.max_tokens)
        best = min(best, time.perf_counter() - started)
    return logits, best


def serve_in_bf16(predictor: Predictor, say: Any = print) -> None:
    """Run the forward passes under bfloat16 autocast (x-serve ``--bf16``): on CPUs with AMX or AVX-512
    BF16 the matmuls are several times faster; the probabilities move by about 1e-2. How far, and how
    much faster, is measured at start on real samples of the run's data and said."""
    import torch  # lazy: loads torch

    from xdpx.export import real_samples  # lazy: loads numpy

    loaded = predictor.loaded
    full, half = loaded.autocast, torch.autocast(device_type=loaded.device.type, dtype=torch.bfloat16)
    try:
        samples = real_samples(loaded.run_args)
    except UserError as e:
        loaded.autocast, predictor.backend = half, "pytorch-bf16"
        say(f"x-serve: --bf16: serving in bfloat16, not compared with float32 ({e})")
        return

    (exact, exact_seconds), (approx, approx_seconds) = (timed_logits(predictor, samples, autocast=full),
                                                        timed_logits(predictor, samples, autocast=half))
    loaded.autocast, predictor.backend = half, "pytorch-bf16"
    if loaded.regression:
        difference = f"the scores differ from float32 by at most {float((exact - approx).abs().max()):.3g}"
    else:
        p, q = exact.softmax(-1), approx.softmax(-1)
        agree = int((p.argmax(-1) == q.argmax(-1)).sum())
        difference = (f"the probabilities differ from float32 by at most {float((p - q).abs().max()):.3g}, "
                      f"the labels agree on {agree} of {len(samples)}")
    say(f"x-serve: --bf16: on {len(samples)} samples of the run's data {difference}; they take "
        f"{approx_seconds * 1000:.1f} ms in bfloat16, {exact_seconds * 1000:.1f} ms in float32")


def load_for_serving(path: str, checkpoint: str | None = None, batch_size: int | None = None, cpu: bool = False,
                     threads: int | None = None, max_tokens: int | None = None, bf16: bool = False,
                     trust_user_dir: bool = False, raw_probs: bool = False, *, backend: str | None = None) -> Predictor:
    """A run directory, or an ONNX export directory (served through onnxruntime once it matches its run);
    ``raw_probs``: leave out the run's calibration (x-serve --raw-probs)."""
    from xdpx.serve.onnx_backend import is_onnx_export, load_onnx_predictor  # lazy: keeps --help light
    from xdpx.utils.cpu_memory import keep_freed_memory  # lazy: keeps --help light

    # every batch frees and allocates activations of several MB (MiniLM's feed-forward at 64 x 40 tokens:
    # 15 MB); glibc would unmap and map them afresh each time, as for x-train's gradients
    keep_freed_memory()

    def say(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    if is_onnx_export(path):
        if checkpoint:
            raise UserError(f"{path} is an ONNX export: its weights are fixed, --checkpoint does not apply")
        if bf16:
            raise UserError(f"{path} is an ONNX export, served in float32: --bf16 applies to a run directory")
        # --backend pins the engine (after the same check against the run); none: the faster one
        pinned = {"torch": "pytorch", "onnx": "onnxruntime", None: "auto"}[backend]
        return load_onnx_predictor(path, batch_size, threads, say=say, max_tokens=max_tokens,
                                   trust_user_dir=trust_user_dir, backend=pinned, raw_probs=raw_probs)
    if bf16 and read_record(path) is not None:
        raise UserError(f"{path} is an int8 model (x-script quantize): --bf16 applies to a float32 run directory")
    predictor = load_predictor(path, checkpoint, batch_size, cpu, threads, max_tokens, trust_user_dir, raw_probs,
                               backend=backend)
    if bf16:
        serve_in_bf16(predictor, say)
        predictor.precision = "bfloat16"
    return predictor
