"""Finding where NaN/Inf first appears: forward hooks on every module, backward hooks on every module
and on every parameter's gradient, while the trainer re-runs the failing update.

The report names the first module whose forward output was not finite (modules finish inner first, so
that is the innermost one to produce it), or, when the forward pass is clean, the first module whose
backward turned finite gradients into non-finite ones, and the first parameter with a non-finite
gradient. The hooks are removed when the ``with`` block ends.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import torch


def _non_finite(value: Any) -> str | None:
    """'nan' / 'inf' when a tensor (or a tensor inside a tuple/list/dict) holds one, else None."""
    if isinstance(value, torch.Tensor):
        if not value.is_floating_point() and not value.is_complex():
            return None
        if torch.isnan(value).any():
            return "nan"
        if torch.isinf(value).any():
            return "inf"
        return None
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        for item in value:
            found = _non_finite(item)
            if found:
                return found
    return None


@dataclass
class Finding:
    where: str   # "forward", "backward" or "gradient"
    name: str    # module or parameter name ("" is the model itself)
    kind: str    # "nan" or "inf"
    detail: str = ""


@dataclass
class NanDetector:
    """``with NanDetector(model) as detector: ...forward/backward...``; then ``detector.report()``."""

    model: torch.nn.Module
    findings: list[Finding] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._handles: list[Any] = []

    def __enter__(self) -> NanDetector:
        # full backward hooks warn when a module's inputs need no gradient (token ids): expected here
        self._warnings = warnings.catch_warnings()
        self._warnings.__enter__()
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        for name, module in self.model.named_modules():
            self._handles.append(module.register_forward_hook(self._forward_hook(name)))
            self._handles.append(module.register_full_backward_hook(self._backward_hook(name)))
        for name, parameter in self.model.named_parameters():
            if parameter.requires_grad:
                self._handles.append(parameter.register_hook(self._gradient_hook(name)))
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._warnings.__exit__(None, None, None)

    def _first(self, where: str) -> Finding | None:
        return next((f for f in self.findings if f.where == where), None)

    def _forward_hook(self, name: str) -> Any:
        def hook(module: torch.nn.Module, inputs: Any, output: Any) -> None:
            if self._first("forward") is None:
                kind = _non_finite(output)
                if kind:
                    clean_input = _non_finite(inputs) is None
                    self.findings.append(Finding("forward", name, kind, type(module).__name__ +
                                                 (" (its inputs were finite)" if clean_input else
                                                  " (its inputs were already not finite)")))
        return hook

    def _backward_hook(self, name: str) -> Any:
        def hook(module: torch.nn.Module, grad_input: Any, grad_output: Any) -> None:
            if self._first("backward") is None:
                kind = _non_finite(grad_input)
                if kind and _non_finite(grad_output) is None:
                    self.findings.append(Finding("backward", name, kind, type(module).__name__))
        return hook

    def _gradient_hook(self, name: str) -> Any:
        def hook(grad: torch.Tensor) -> None:
            if self._first("gradient") is None:
                kind = _non_finite(grad)
                if kind:
                    self.findings.append(Finding("gradient", name, kind))
        return hook

    def check_loss(self, loss: torch.Tensor) -> None:
        kind = _non_finite(loss)
        if kind and self._first("loss") is None:
            self.findings.append(Finding("loss", "", kind))

    def report(self) -> str:
        """One line saying where NaN/Inf first appeared (empty when it did not appear again)."""
        forward, backward, gradient = self._first("forward"), self._first("backward"), self._first("gradient")
        loss = self._first("loss")

        def module(name: str) -> str:
            return f"module {name!r}" if name else "the model's own forward (top-level code)"

        parts = []
        if forward is not None:
            parts.append(f"{forward.kind} first appeared in the forward output of {module(forward.name)} "
                         f"({forward.detail})")
        elif loss is not None:
            parts.append(f"the model's outputs were finite; the loss is {loss.kind}")
        elif backward is not None:
            parts.append(f"the forward pass was finite; {backward.kind} first appeared in the backward of "
                         f"{module(backward.name)} ({backward.detail}): its input gradients are not finite "
                         "while its output gradients were")
        if gradient is not None:
            parts.append(f"first parameter with a non-finite gradient: {gradient.name!r} ({gradient.kind})")
        return "; ".join(parts)
