"""TorchScript export: the model traced on a real batch, saved with torch.jit.save, reloaded from the
saved file and checked against the eager model at several batch sizes and sequence lengths.

Tracing (not scripting) because our models take keyword inputs and use Python freely; the parity check
on shapes other than the traced one is what proves the trace did not bake a shape in.
"""

from __future__ import annotations

import io as pyio
from typing import Any

import torch

from xdpx import io
from xdpx.export.export_forms import export_form
from xdpx.export.parity import ParityReport, check_parity, parity_batches
from xdpx.export.wrapping import PositionalModel, positional

MODEL_FILE = "model.pt"


def trace(model: torch.nn.Module, input_names: list[str], example: dict[str, Any]) -> torch.jit.ScriptModule:
    wrapper = PositionalModel(export_form(model), input_names).eval()
    with torch.no_grad():
        # check_trace compares on the same input only; check_parity below tries other shapes.
        return torch.jit.trace(wrapper, positional(example, input_names), check_trace=False)


def export_torchscript(run: Any, out_dir: str, samples: list[dict[str, Any]]) -> tuple[str, ParityReport, list[str]]:
    """Write out_dir/model.pt; return its path, the parity report of the reloaded file, the input order."""
    batches = parity_batches(run.processor, samples)
    input_names = list(batches[0])
    example = max(batches, key=lambda b: next(iter(b.values())).numel())  # a mixed batch with padding
    traced = trace(run.model, input_names, example)
    buffer = pyio.BytesIO()
    torch.jit.save(traced, buffer)
    path = io.join(out_dir, MODEL_FILE)
    io.makedirs(out_dir)
    with io.open(path, "wb") as f:
        f.write(buffer.getvalue())
    # Check the file as a user will load it, not the object in memory.
    with io.open(path, "rb") as f:
        loaded = torch.jit.load(pyio.BytesIO(f.read()), map_location="cpu")
    loaded.eval()
    report = check_parity(lambda b: run.model(**b), lambda b: loaded(*positional(b, input_names)), batches,
                          "TorchScript")
    return path, report, input_names
