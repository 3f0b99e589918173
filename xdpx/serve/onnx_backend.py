"""``x-serve EXPORT_DIR``: serve an ONNX export (x-script export_onnx) through onnxruntime.

The export's export.json names the run it came from (save_dir, checkpoint): its processor, parser and
loader encode the inputs as for the run itself, and its PyTorch model is the reference of the check
made at start: onnxruntime must give the model's outputs on real samples of the run's data, in batches of
several shapes (xdpx.export.parity, tolerance 1e-4), or x-serve stops with the difference. Then both are
timed on those samples and the faster one serves (onnxruntime is usually faster on the CPU for the small
models; the choice and the times are printed). The run directory must therefore be reachable.
"""

from __future__ import annotations

import json
import os
from typing import Any

from xdpx.errors import UserError
from xdpx.runtime.onnx_session import OnnxModel

__all__ = ["OnnxModel", "is_onnx_export", "load_onnx_predictor"]

EXPORT_RECORD = "export.json"
ONNX_FILE = "model.onnx"


def is_onnx_export(path: str) -> bool:
    """True for a folder holding export.json of format onnx and model.onnx."""
    record = os.path.join(path, EXPORT_RECORD)
    if not (os.path.isfile(record) and os.path.isfile(os.path.join(path, ONNX_FILE))):
        return False
    with open(record, encoding="utf-8") as f:
        return json.load(f).get("format") == "onnx"


def load_onnx_predictor(export_dir: str, batch_size: int | None = None, threads: int | None = None,
                        say: Any = print, max_tokens: int | None = None, trust_user_dir: bool = False,
                        backend: str = "auto", raw_probs: bool = False) -> Any:
    """A Predictor whose model is the export's onnxruntime session when it matches the run's model and is
    faster on the CPU (else the run's PyTorch model, said so); raises UserError when parity fails.
    ``backend`` "onnxruntime" or "pytorch" pins the choice (after the same parity check); "auto" times both.
    The run's calibration.json applies as to the run itself (the export holds the same weights), unless
    ``raw_probs``."""
    if backend not in ("auto", "onnxruntime", "pytorch"):
        raise ValueError(f"backend must be auto, onnxruntime or pytorch, not {backend!r}")
    from xdpx.export import (  # lazy: torch, for an export only
        ParityError,
        check_parity,
        parity_batches,
        real_samples,
    )
    from xdpx.serve.predictor import load_predictor, timed_logits  # lazy: predictor.py imports this module

    with open(os.path.join(export_dir, EXPORT_RECORD), encoding="utf-8") as f:
        record = json.load(f)
    save_dir, checkpoint = record.get("save_dir"), record.get("checkpoint")
    if not save_dir or not os.path.isdir(save_dir):
        raise UserError(f"{export_dir}: the run of this export ({save_dir!r}, from {EXPORT_RECORD}) is not here; "
                        "x-serve checks the ONNX model against it at start: serve the run directory instead, "
                        "or copy it to that path")
    predictor = load_predictor(save_dir, checkpoint, batch_size, cpu=True, threads=threads, max_tokens=max_tokens,
                               trust_user_dir=trust_user_dir, raw_probs=raw_probs)
    loaded = predictor.loaded
    onnx_model = OnnxModel(os.path.join(export_dir, ONNX_FILE), record["inputs"], threads)
    samples = real_samples(loaded.run_args)
    try:
        report = check_parity(lambda b: loaded.model(**b), lambda b: onnx_model(**b),
                              parity_batches(loaded.processor, samples), "ONNX (onnxruntime)")
    except ParityError as e:
        raise UserError(f"{export_dir}: {e}: the export does not match its run; export it again") from None

    torch_seconds = timed_logits(predictor, samples)[1]
    onnx_seconds = timed_logits(predictor, samples, model=onnx_model)[1]
    faster = onnx_seconds < torch_seconds if backend == "auto" else backend == "onnxruntime"
    say(f"x-serve: {ONNX_FILE} matches the run's model ({report.describe()}); {len(samples)} samples take "
        f"{onnx_seconds * 1000:.1f} ms with onnxruntime, {torch_seconds * 1000:.1f} ms with PyTorch: serving with "
        f"{'onnxruntime' if faster else 'PyTorch (the faster here)'}")
    if faster:
        loaded.model = onnx_model
    predictor.backend = "onnxruntime" if faster else "pytorch"
    return predictor
