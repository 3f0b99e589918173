"""Whether the model is being captured as a graph rather than run eagerly."""

from __future__ import annotations

import torch


def capturing_graph() -> bool:
    """True under torch.compile, TorchScript tracing and ONNX export: code that takes an eager-only fast
    path (a cached tensor, a hand-drawn dropout mask, written-out attention) takes torch's plain ops there,
    which the compiler fuses and the exports keep as single operators."""
    return torch.compiler.is_compiling() or torch.jit.is_tracing() or torch.onnx.is_in_onnx_export()
