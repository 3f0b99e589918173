"""Which engine runs a model for x-eval, x-pred and x-serve: ``backend: torch | onnx``.

- A run directory of x-train: ``torch`` (the default) only; its ONNX form is an export (x-script
  export_onnx), which x-serve serves.
- An int8 model folder of x-script quantize (xdpx/models/int8.py): ``torch`` rebuilds the run's model with
  dynamic int8 Linear / LSTM layers from model_int8.safetensors; ``onnx`` runs model_int8.onnx through
  onnxruntime. Default: the faster of the two as the quantize command measured it (int8.json's
  ``backend``). Either way on the CPU (the int8 kernels are CPU kernels).

The run's processor, task and batching stay the run's own, so requests and answers are the same on
either backend; only the forward pass changes.
"""

from __future__ import annotations

from typing import Any

import torch

from xdpx import io
from xdpx.config.errors import ConfigError
from xdpx.config.options import Args
from xdpx.data.composition import build_processor
from xdpx.inference.loading import LoadedModel, processor_dir
from xdpx.models import int8
from xdpx.runtime.onnx_session import OnnxModel
from xdpx.runtime.precision import autocast
from xdpx.runtime.seeding import seed_everything

BACKENDS = ("torch", "onnx")


def int8_backend(args: Args, record: dict[str, Any]) -> str:
    """The backend an int8 folder runs on: ``args.backend``, else the recorded faster one."""
    backend = args.get("backend") or record.get("backend") or "torch"
    if backend == "onnx" and not record.get("onnx"):
        raise ConfigError(f"{args.source('backend')}: key 'backend': onnx: the int8 model {args.save_dir} has no "
                          f"{int8.ONNX_MODEL} (x-script quantize wrote it with --onnx false): use backend torch")
    return backend


def load_backend(args: Args, run_args: Args, say: Any = print) -> LoadedModel | None:
    """The LoadedModel of an int8 folder (either backend), None for a plain run on torch (loaded as usual)."""
    record = int8.read_record(args.save_dir) if args.save_dir is not None else None
    if record is None:
        if args.get("backend") == "onnx":
            raise ConfigError(f"{args.source('backend')}: key 'backend': onnx: {args.save_dir or args.config} is not an int8 model of x-script quantize; "
                            "a run's ONNX form is served from its export (x-script export_onnx, then x-serve "
                            "EXPORT_DIR --backend onnx), or quantize the run (x-script quantize) and use its folder")
        return None
    if args.checkpoint is not None or args.get("from_tf"):
        key = "checkpoint" if args.checkpoint is not None else "from_tf"
        raise ConfigError(f"{args.source(key)}: key '{key}': {args.save_dir} is an int8 model (x-script quantize): its "
                          "weights are fixed, checkpoint and from_tf do not apply")
    backend = int8_backend(args, record)
    seed_everything(args.seed)
    task = run_args.option("task").registry.get(run_args.get("task"))(run_args)
    model = task.build_model()
    weights = io.join(args.save_dir, int8.WEIGHTS)
    if backend == "onnx":
        model = OnnxModel(io.join(args.save_dir, record["onnx"]["file"]), record["onnx"]["inputs"],
                          torch.get_num_threads())
    else:
        model = int8.load_int8(model, weights)
    say(f"int8 model {args.save_dir} (quantized from {record.get('source')}) on backend {backend}")
    processor = build_processor(run_args, data_dir=processor_dir(args, run_args))
    batch_size = args.batch_size or run_args.get("valid_batch_size") or run_args.batch_size
    loaded = LoadedModel(run_args, task, model, processor, torch.device("cpu"), autocast(torch.device("cpu"), False, False),
                         int(batch_size), weights if backend == "torch" else record["onnx"]["file"], run_args.data_dir)
    loaded.backend, loaded.precision = backend, "int8"  # type: ignore[attr-defined]
    return loaded
