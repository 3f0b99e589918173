"""Built-in variables for configs: ``${__date__}``, ``${__gpus__}``, ``${__bf16__}``, ...

Each is computed on first use only, so a config that does not mention ``__gpus__`` never imports
torch for it (invariant 9 of docs/architecture.md: ``--dry`` stays fast).
"""

from __future__ import annotations

import datetime
import os
import subprocess
from collections.abc import Callable
from typing import Any

_cache: dict[str, Any] = {}


def _date() -> str:
    return datetime.date.today().strftime("%Y%m%d")


def _commit() -> str:
    """Short hash of the git commit of the working directory, '' outside a repository."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def _gpus() -> int:
    import torch  # lazy: torch is heavy; import xdpx and every --help start without it

    return torch.cuda.device_count()


def _cuda() -> bool:
    import torch  # lazy: torch is heavy; import xdpx and every --help start without it

    return torch.cuda.is_available()


def _fp16() -> bool:
    """fp16 mixed precision is worth it: a CUDA GPU with tensor cores (compute capability >= 7)."""
    import torch  # lazy: torch is heavy; import xdpx and every --help start without it

    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 7


def _bf16() -> bool:
    """The hardware runs bf16 natively: an Ampere+ GPU, or a CPU with AVX512-BF16 or AMX."""
    import torch  # lazy: torch is heavy; import xdpx and every --help start without it

    if torch.cuda.is_available():
        return torch.cuda.is_bf16_supported()
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def _workers() -> int:
    """Processes in this (distributed) job: torchrun's WORLD_SIZE, Slurm's task count, else 1."""
    for name in ("WORLD_SIZE", "SLURM_NTASKS"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 1


BUILTINS: dict[str, Callable[[], Any]] = {
    "__date__": _date,
    "__commit__": _commit,
    "__gpus__": _gpus,
    "__cuda__": _cuda,
    "__fp16__": _fp16,
    "__apex__": _fp16,  # kept so old configs' `fp16: ${__apex__}` mean "fp16 where available"
    "__bf16__": _bf16,
    "__workers__": _workers,
    "__cpus__": lambda: os.cpu_count() or 1,
}


def get(name: str) -> Any:
    if name not in _cache:
        _cache[name] = BUILTINS[name]()
    return _cache[name]
