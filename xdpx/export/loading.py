"""Load a finished (or running) x-train run for export: its options, processor, task and weights.

The same loader as x-eval / x-pred / x-serve (:func:`xdpx.inference.loading.load_model`): everything comes
from the run directory (invariant 1 of docs/architecture.md), weights from ``<best>`` / ``<last>`` or a path, every key of
the run's own checkpoint must fit. Exports always load on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xdpx import io
from xdpx.command import COMMON_OPTIONS
from xdpx.config.errors import ConfigError
from xdpx.config.options import resolve
from xdpx.errors import UserError
from xdpx.inference import LOAD_OPTIONS, load_model
from xdpx.models.checkpoints import BEST, LAST


@dataclass
class LoadedRun:
    """A run rebuilt for inference: ``model`` is in eval mode on the CPU with the checkpoint's weights."""

    save_dir: str
    checkpoint: str  # the resolved weights file
    args: Any  # xdpx.config.options.Args with the run's options
    task: Any
    model: Any
    processor: Any


def load_run(save_dir: str, checkpoint: str = "<best>", trust_user_dir: bool = False,
             user_dir: str | None = None) -> LoadedRun:
    """Rebuild the run's task, model and processor and load the checkpoint's weights (strictly); the
    user_dir the run names is imported with ``trust_user_dir`` only (or ``user_dir``, the user's own)."""
    spec = io.join(save_dir, checkpoint) if checkpoint in (BEST, LAST) else checkpoint
    values = {"save_dir": save_dir, "checkpoint": spec, "cuda": False, "trust_user_dir": trust_user_dir,
              "user_dir": user_dir}
    try:
        args = resolve(values, COMMON_OPTIONS + LOAD_OPTIONS, "export", check_paths=False)
    except ConfigError as e:  # not expected: the export command has checked save_dir already

        raise UserError(str(e)) from e
    loaded = load_model(args, say=lambda _message: None)
    if loaded.run_args.get("lora") is not None:  # exports hold the plain model: the adapters folded into the weights
        from xdpx.models.lora import merge_lora  # lazy: loads torch, numpy

        merge_lora(loaded.model)
    return LoadedRun(save_dir, loaded.checkpoint, loaded.run_args, loaded.task, loaded.model, loaded.processor)
