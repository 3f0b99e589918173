"""``compile: true``: the model's forward (and so its backward) compiled by torch.compile's inductor.

The model is compiled in place (``nn.Module.compile``), so its state_dict keeps its own key names (no
``_orig_mod.`` prefix): checkpoints, state.pt and resume are the same with and without compilation.
Inductor writes C++ (CPU) or Triton (CUDA) kernels and needs a C++ compiler. Where there is none, or
torch has no inductor, a warning is logged once and the model runs eagerly; a graph that fails to
compile later falls back to eager code too (dynamo's ``suppress_errors``), with torch's own warning.
Shapes are dynamic from the first batch (``dynamic=True``): the batches' lengths vary, and torch's
default (compile for the first shape, recompile as dynamic at the second) would run the first updates
of a resumed run with other kernels than the run it continues, breaking the bit-for-bit resume.
Compilation costs tens of seconds at the first batch (and for evaluation), so it pays on long runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

_warned: set[str] = set()


def why_not_compilable() -> str | None:
    """Why torch.compile's inductor cannot run on this machine, or None when it can."""
    if not hasattr(torch, "compile"):
        return f"torch {torch.__version__} has no torch.compile"
    try:
        # lazy: torch's compiler (dynamo, inductor) takes seconds to load; only with compile: true
        from torch import _dynamo  # noqa: F401
        from torch._inductor import config  # lazy: inductor, as above
        from torch._inductor.cpp_builder import get_cpp_compiler  # lazy: inductor, as above
    except Exception as error:  # a torch build without inductor
        return f"torch's inductor is not available ({type(error).__name__}: {error})"
    try:
        get_cpp_compiler()
    except Exception:
        searched = config.cpp.cxx if isinstance(config.cpp.cxx, (list, tuple)) else (config.cpp.cxx,)
        names = ", ".join(str(c) for c in searched if c)
        return (f"no C++ compiler found (searched {names}; set the CXX environment variable or install g++: "
                "apt-get install g++)")
    return None


def compile_module(module: torch.nn.Module, say: Callable[[str], Any] = print) -> bool:
    """Compile ``module`` in place with inductor; False (after one warning) when it cannot be."""
    reason = why_not_compilable()
    if reason is not None:
        if reason not in _warned:
            _warned.add(reason)
            say(f"warning: compile: true but {reason}: the model runs eagerly (same results, no speed-up)")
        return False
    from torch import _dynamo  # lazy: torch._dynamo loads slowly

    _dynamo.config.suppress_errors = True  # a graph inductor cannot build runs eagerly instead
    if all(p.device.type == "cpu" for p in module.parameters()):
        # Inductor's CPU kernels for index_put/scatter with accumulation (an embedding's backward) add in
        # parallel, in an order that changes from run to run; in deterministic mode it calls torch's own
        # kernels there, so a resumed run stays bit for bit (invariant 4 of docs/architecture.md is promised on the CPU).
        # Filling new tensors with NaN is a debugging aid of that mode that costs time: left off.
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.utils.deterministic.fill_uninitialized_memory = False  # type: ignore[attr-defined]
    module.compile(backend="inductor", dynamic=True)
    return True
