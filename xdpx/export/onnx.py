"""ONNX export with dynamic batch and sequence axes (the dynamo exporter, torch.export underneath),
checked with onnxruntime at several batch sizes and sequence lengths on real samples.

The legacy TorchScript-based exporter bakes the traced shapes into attention reshapes, so a model it
writes may fail or silently mis-compute at other lengths; torch.export with ``Dim.DYNAMIC`` axes infers
which axes are equal (e.g. input_ids and attention_mask) and keeps them symbolic.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import torch

from xdpx import io
from xdpx.errors import UserError
from xdpx.export.export_forms import export_form
from xdpx.export.parity import ParityReport, check_parity, parity_batches
from xdpx.export.wrapping import PositionalModel, positional
from xdpx.models.choice import model_label
from xdpx.utils.optional import require

MODEL_FILE = "model.onnx"


def require_onnx() -> None:
    """Stop with one line when a package of the [onnx] extra is missing (torch's exporter needs onnxscript)."""
    for module in ("onnx", "onnxruntime", "onnxscript"):
        require(module, "export_onnx")


def name_dynamic_axes(model: Any, input_names: list[str]) -> None:
    """Rename the exporter's symbols (s0, s1...) to batch / sequence[_k] everywhere in the graph."""
    graph = model.graph
    renames: dict[str, str] = {}
    sequences: list[str] = []
    for value in graph.input:
        dims = value.type.tensor_type.shape.dim
        if len(dims) > 0 and dims[0].dim_param:
            renames.setdefault(dims[0].dim_param, "batch")
        if len(dims) > 1 and dims[1].dim_param and dims[1].dim_param not in renames:
            sequences.append(dims[1].dim_param)
            renames[dims[1].dim_param] = "sequence"
    if len(sequences) > 1:
        for k, symbol in enumerate(sequences, 1):
            renames[symbol] = f"sequence_{k}"
    for value in [*graph.input, *graph.output, *graph.value_info]:
        for dim in value.type.tensor_type.shape.dim:
            if dim.dim_param in renames:
                dim.dim_param = renames[dim.dim_param]


def output_names(model: Any, example: dict[str, Any]) -> list[str]:
    """``logits``, or for a model returning several tensors (bert_pretrain) a name for each."""
    with torch.no_grad():
        out = model(**example)
    if not isinstance(out, (tuple, list)):
        return ["logits"]
    return ["mlm_logits", "sop_logits"] if len(out) == 2 else [f"output_{i}" for i in range(len(out))]


def export_onnx(run: Any, out_dir: str, samples: list[dict[str, Any]],
                opset_version: int | None = None) -> tuple[str, ParityReport, list[str]]:
    """Write out_dir/model.onnx; return its path, the onnxruntime parity report and the input order."""
    require_onnx()  # before the imports below: one line, not a traceback, when the extra is missing
    import onnx  # lazy: optional onnx
    import onnxruntime  # lazy: optional onnxruntime
    from torch.export import Dim  # lazy: torch.export loads slowly

    batches = parity_batches(run.processor, samples)
    input_names = list(batches[0])
    example = max(batches, key=lambda b: next(iter(b.values())).numel())
    wrapper = PositionalModel(export_form(run.model), input_names).eval()
    # One spec per positional input (they are the *inputs of the wrapper): every axis of a token field
    # is dynamic; torch.export works out which are equal.
    dynamic = tuple({axis: Dim.DYNAMIC for axis in range(example[n].dim())} for n in input_names)
    with tempfile.TemporaryDirectory() as tmp:
        local = os.path.join(tmp, MODEL_FILE)
        try:
            with torch.no_grad():
                torch.onnx.export(wrapper, positional(example, input_names), local, input_names=input_names,
                                  output_names=output_names(run.model, example), dynamic_shapes=(dynamic,),
                                  dynamo=True, external_data=False, opset_version=opset_version)
        except Exception as e:  # the exporter's errors are long; say what failed and what still works

            summary = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise UserError(f"export_onnx: the ONNX exporter cannot capture model {model_label(run.args)} ({summary}); "
                            "export_torchscript may still work, and the traceback above says where") from e
        proto = onnx.load(local)
        name_dynamic_axes(proto, input_names)
        onnx.checker.check_model(proto)
        data = proto.SerializeToString()
    path = io.join(out_dir, MODEL_FILE)
    io.makedirs(out_dir)
    with io.open(path, "wb") as f:
        f.write(data)
    with io.open(path, "rb") as f:  # check the written file, as a user will load it
        session = onnxruntime.InferenceSession(f.read(), providers=["CPUExecutionProvider"])

    def run_onnx(batch: dict[str, Any]) -> Any:
        return session.run(None, {n: batch[n].numpy() for n in input_names})

    report = check_parity(lambda b: run.model(**b), run_onnx, batches, "ONNX (onnxruntime)")
    return path, report, input_names
