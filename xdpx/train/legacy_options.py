"""Mixed-precision options of the original manual that old configs still carry.

XDPX trains fp16 with torch autocast and its own dynamic loss scaler (xdpx/runtime/precision.py), which is
what the original XDPX's `fp16_backend: fairseq` did; apex is not used. These keys are accepted so that old
configs run unchanged, and x-train prints what each given value maps to.
"""

from __future__ import annotations

from typing import Any

from xdpx.config.options import Option

LEGACY_FP16_OPTIONS: list[Any] = [
    Option("fp16_backend", str, default="fairseq", choices=["fairseq", "apex"],
           doc="accepted for old configs: both values train the same way, torch autocast with dynamic loss "
               "scaling (the fp16_* options), which is what the fairseq backend did"),
    Option("opt_level", str, default="O1", choices=["O0", "O1", "O2", "O3"],
           doc="apex opt_level, accepted for old configs: fp16: true always trains like apex O1 (autocast, "
               "fp32 weights); O0 means fp32 (fp16: false)"),
    Option("memory_efficient_fp16", bool, default=False,
           doc="accepted for old configs, no effect: weights and optimizer state stay fp32 under autocast"),
]

_MEANING = {
    "fp16_backend": lambda v: f"fp16_backend: {v} -> torch autocast with XDPX's dynamic loss scaler "
                              "(fp16_init_scale, fp16_scale_tolerance, ...); apex is not used",
    "opt_level": lambda v: (f"opt_level: {v} -> fp32 training: set fp16: false" if v == "O0" else
                            f"opt_level: {v} -> trained like apex O1 (autocast, fp32 master weights)"
                            + ("" if v == "O1" else f"; {v}'s fp16 weights are not reproduced")),
    "memory_efficient_fp16": lambda v: f"memory_efficient_fp16: {str(v).lower()} -> no effect (fp32 weights "
                                       "and optimizer state under autocast)",
}


def legacy_notes(args: Any) -> list[str]:
    """One line per legacy option given in the config: what it maps to."""
    return [f"{args.source(name)}: {_MEANING[name](args.get(name))}"
            for name in _MEANING if args.option(name) is not None and not args.is_default(name)]
