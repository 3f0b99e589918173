"""An int8 model of a run, measured against the float32 one: what ``x-script quantize`` does.

:func:`quantize_run` loads the run's checkpoint (as the exports do), writes the int8 folder
(xdpx/models/int8.py: args.py, vocabulary, int8.json, model_int8.safetensors, model_int8.onnx) in a
temporary folder beside ``out_dir``, evaluates the float32 model and the int8 folder *as x-eval loads it*
on the split the user names, and moves the folder in place only when no backend loses more than
``tolerance`` points of the run's major metric. The measurement is written beside the model
(quantize.json). Nothing else is written; a refusal leaves nothing.

Points: a metric in [0, 1] (accuracy, F1...) counts 100 points, so tolerance 1 allows 0.01 of accuracy.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from typing import Any

from xdpx import io
from xdpx.command import COMMON_OPTIONS
from xdpx.config.errors import ConfigError
from xdpx.config.options import resolve
from xdpx.config.writers import write_run_files
from xdpx.data.dataset import open_split
from xdpx.export.loading import load_run
from xdpx.export.onnx import export_onnx
from xdpx.export.parity import real_samples
from xdpx.inference import LOAD_OPTIONS, load_model, run_options
from xdpx.io.ownership import claim, is_run_dir
from xdpx.models import int8
from xdpx.models.choice import model_label
from xdpx.runtime.run_files import available_splits
from xdpx.runtime.scoring import evaluate

TOOL = "quantize"
REPORT = "quantize.json"
COPIED_FILES = ("vocab.txt", "target_map.txt", "tokenizer.json")
QUANTIZED_KINDS = ("Linear", "LSTM")


def check_tolerance(tolerance: float) -> None:
    if not 0 <= tolerance <= 100:
        raise ConfigError([f"--tolerance {tolerance:g} is out of range: give the most points of the major "
                           "metric the int8 model may lose, between 0 and 100 (default 1)"])


def check_source(run_dir: str) -> None:

    if int8.read_record(run_dir) is not None:
        raise ConfigError([f"{run_dir} is already an int8 model ({int8.RECORD}); quantize the run it came from"])
    if not io.isdir(run_dir) or not is_run_dir(run_dir):
        raise ConfigError([f"{run_dir} is not a run directory of x-train (no args.py with its checkpoints): "
                           "give the save_dir of a trained run"])


def supported_layers(model: Any, label: str) -> dict[str, str]:
    """The Linear / LSTM layers that become int8; ConfigError naming the model's layers when none."""
    layers = {name: kind for name, kind in int8.int8_layers(model).items() if kind in QUANTIZED_KINDS}
    if not layers:
        raise ConfigError([f"model {label} has no Linear or LSTM layer to run in int8 (its layers with "
                           f"weights: {', '.join(int8.layer_kinds(model))}): it is not supported"])
    return layers


def score(loaded: Any, split: str) -> tuple[dict[str, float], Any, float]:
    """(metrics, probabilities (scores for regression), seconds) of ``loaded`` on ``split``, as x-eval scores it."""
    outputs: list[Any] = []
    started = time.perf_counter()
    metrics = evaluate(loaded.task, loaded.model, loaded.processor, open_split(loaded.data_dir, split), loaded.batch_size,
                       loaded.autocast, loaded.to_device, outputs_to=outputs)
    seconds = time.perf_counter() - started
    logits = outputs[0][0].float() if outputs else None
    if logits is None:
        return metrics, None, seconds
    if loaded.regression:  # scores are compared as they are
        return metrics, logits, seconds
    probabilities = logits.sigmoid() if logits.dim() == 1 or logits.shape[-1] == 1 else logits.softmax(-1)
    return metrics, probabilities, seconds


def points(value: float) -> float:
    return value * 100.0


def load_folder(folder: str, backend: str | None, checkpoint: str | None = None, trust_user_dir: bool = False) -> Any:
    """The model of ``folder`` as x-eval loads it (run directory or int8 folder), on the CPU."""
    values = {"save_dir": folder, "cuda": False, "backend": backend, "trust_user_dir": trust_user_dir,
              "checkpoint": checkpoint}
    args = resolve({k: v for k, v in values.items() if v is not None}, COMMON_OPTIONS + LOAD_OPTIONS, TOOL,
                   check_paths=False)
    return load_model(args, say=lambda _message: None)


def small_tables(path: str) -> list[str]:
    """The Gather nodes of embedding tables under int8.WORD_TABLE_ROWS rows (positions, token types): they
    stay float32 in ONNX as in PyTorch."""
    import onnx  # lazy: optional package (the [onnx] extra)

    graph = onnx.load(path).graph
    rows = {t.name: t.dims[0] for t in graph.initializer if len(t.dims) == 2}
    return [n.name for n in graph.node if n.op_type == "Gather" and rows.get(n.input[0], int8.WORD_TABLE_ROWS) < int8.WORD_TABLE_ROWS]


def write_onnx(run: Any, folder: str, samples: list[dict[str, Any]]) -> dict[str, Any]:
    """model_int8.onnx: the run's ONNX export (checked against the model) quantized by onnxruntime."""
    from onnxruntime.quantization import (  # lazy: optional package (the [onnx] extra)
        QuantType,
        quantize_dynamic,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process  # lazy: optional package, as above


    with tempfile.TemporaryDirectory() as tmp:
        path, report, inputs = export_onnx(run, tmp, samples)
        prepared = os.path.join(tmp, "prepared.onnx")
        quant_pre_process(path, prepared, skip_symbolic_shape=True)  # onnxruntime's own graph optimisation first
        quantize_dynamic(prepared, os.path.join(folder, int8.ONNX_MODEL), weight_type=QuantType.QInt8,
                         per_channel=True, nodes_to_exclude=small_tables(prepared))
    return {"file": int8.ONNX_MODEL, "inputs": inputs, "fp32_parity": report.describe(),
            "quantizer": "onnxruntime.quantization.quantize_dynamic (QInt8, per channel)"}


def int8_args(run: Any, out_dir: str, trust_user_dir: bool) -> Any:
    """The run's options as the int8 folder's args.py holds them (save_dir: the folder; adapters folded in)."""
    extra: dict[str, Any] = {"save_dir": out_dir, **({"lora": None} if run.args.get("lora") is not None else {})}
    values = {"save_dir": run.save_dir, "cuda": False, "extra_config": extra, "trust_user_dir": trust_user_dir}
    return run_options(resolve(values, COMMON_OPTIONS + LOAD_OPTIONS, TOOL, check_paths=False))


def write_folder(run: Any, folder: str, out_dir: str, onnx: bool, samples: list[dict[str, Any]],
                 trust_user_dir: bool = False) -> dict[str, Any]:
    """Write the int8 folder's files into ``folder`` (to become ``out_dir``); returns int8.json's record."""
    layers = supported_layers(run.model, model_label(run.args))
    claim(f"x-script {TOOL}", folder)
    write_run_files(int8_args(run, out_dir, trust_user_dir), folder,
                    header=f"# int8 model (quantization: int8) written by x-script quantize from {run.checkpoint}; "
                           f"see {int8.RECORD}. For inference only: x-train refuses it\n")
    for name in COPIED_FILES:
        if io.exists(io.join(run.save_dir, name)):
            io.copy(io.join(run.save_dir, name), io.join(folder, name))
    int8.save_int8(run.model, io.join(folder, int8.WEIGHTS))
    kinds: dict[str, int] = {}
    for kind in layers.values():
        kinds[kind] = kinds.get(kind, 0) + 1
    record = {"quantization": "int8", "written_by": f"x-script {TOOL}", "source": run.checkpoint,
              "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "torch": {"file": int8.WEIGHTS, "engine": "torch.ao.quantization.quantize_dynamic (qint8: Linear per "
                        "channel, LSTM per tensor)", "int8_layers": kinds,
                        "stored_int8": sorted(int8.int8_weight_names(run.model))},
              "onnx": write_onnx(run, folder, samples) if onnx else None, "backend": "torch"}
    write_record(folder, record)
    return record


def write_record(folder: str, record: dict[str, Any]) -> None:
    with io.open(io.join(folder, int8.RECORD), "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")


def quantize_run(run_dir: str, out_dir: str, checkpoint: str = "<best>", split: str = "dev", tolerance: float = 1.0,
                 onnx: bool = True, trust_user_dir: bool = False, say: Any = print) -> dict[str, Any]:
    """Write the int8 model of ``run_dir`` to ``out_dir`` and return what was measured (quantize.json).

    ConfigError (nothing written) for a folder that is no run, a model without Linear / LSTM layers, a split
    the run's data_dir lacks, a tolerance outside [0, 100], or an int8 model losing more than ``tolerance``
    points of the major metric on ``split`` on any backend it holds."""
    check_tolerance(tolerance)
    check_source(run_dir)
    run = load_run(run_dir, checkpoint, trust_user_dir=trust_user_dir)
    splits = available_splits(run.args.data_dir) if io.isdir(run.args.data_dir) else []
    if split not in splits:
        raise ConfigError([f"--split {split!r} is not a split of the run's data_dir {run.args.data_dir} "
                           f"(available: {', '.join(splits) or 'none'})"])

    supported_layers(run.model, model_label(run.args))
    major, higher = run.args.major_metric, bool(run.args.get("ascending_metric", True))
    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    folder = tempfile.mkdtemp(prefix=f".{os.path.basename(out_dir.rstrip('/'))}.quantize-", dir=parent)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(folder, 0o777 & ~umask)  # mkdtemp's folder is private; the model folder is an ordinary one
    try:
        say(f"{TOOL}: writing the int8 model of {run.checkpoint}")
        record = write_folder(run, folder, out_dir, onnx, real_samples(run.args), trust_user_dir)
        reference = load_folder(run_dir, None, checkpoint if "<" not in checkpoint else io.join(run_dir, checkpoint),
                                trust_user_dir)
        fp32, fp32_probs, fp32_seconds = score(reference, split)
        report: dict[str, Any] = {"split": split, "major_metric": major, "higher_is_better": higher,
                                  "tolerance_points": tolerance, "fp32": {**fp32, "seconds": round(fp32_seconds, 3)},
                                  "size_bytes": {"fp32": os.path.getsize(run.checkpoint)}}
        failures, outputs = [], "score" if reference.regression else "probability"
        for backend, file in (("torch", int8.WEIGHTS), ("onnx", int8.ONNX_MODEL if record["onnx"] else None)):
            if file is None:
                continue
            metrics, probs, seconds = score(load_folder(folder, backend), split)
            loss = points(fp32[major] - metrics[major]) if higher else points(metrics[major] - fp32[major])
            largest = float((probs - fp32_probs).abs().max()) if probs is not None and fp32_probs is not None else None
            report[f"int8_{backend}"] = {**metrics, "seconds": round(seconds, 3), "loss_points": round(loss, 4),
                                         f"max_{outputs}_difference": largest}
            report["size_bytes"][f"int8_{backend}"] = os.path.getsize(os.path.join(folder, file))
            say(f"{TOOL}: {split} {major}: fp32 {fp32[major]:.4f}, int8 {backend} {metrics[major]:.4f} "
                f"({loss:+.2f} points lost; {outputs.replace('y', 'ie')}s differ by at most {largest if largest is None else f'{largest:.3g}'}); "
                f"{report['size_bytes'][f'int8_{backend}'] / 1e6:.1f} MB against {report['size_bytes']['fp32'] / 1e6:.1f} MB")
            if loss > tolerance:
                failures.append(f"int8 {backend} loses {loss:.2f} points of {major} on {split} ({fp32[major]:.4f} -> "
                                f"{metrics[major]:.4f})")
        if failures:
            raise ConfigError([f"refused, nothing written: {'; '.join(failures)}, more than --tolerance "
                               f"{tolerance:g}"])
        timed = [b for b in ("torch", "onnx") if f"int8_{b}" in report]
        record["backend"] = min(timed, key=lambda b: report[f"int8_{b}"]["seconds"])
        report["backend"] = record["backend"]
        write_record(folder, record)
        with io.open(io.join(folder, REPORT), "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
        if os.path.isdir(out_dir):
            shutil.rmtree(out_dir)  # checked by the caller: a folder this tool wrote before
        os.replace(folder, out_dir)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return report
