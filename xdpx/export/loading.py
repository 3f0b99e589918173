"""Load a finished (or running) x-train run for export: its options, processor, task and weights.

Everything comes from the run directory (DESIGN invariant 1): args.py (read with ast.literal_eval),
the vocabulary and target map x-train copied there, and a weights checkpoint resolved through
xdpx/train/checkpoints.py (``<best>`` / ``<last>`` or a path).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xdpx import io


@dataclass
class LoadedRun:
    """A run rebuilt for inference: ``model`` is in eval mode on the CPU with the checkpoint's weights."""

    save_dir: str
    checkpoint: str  # the resolved weights file
    args: Any  # xdpx.config.options.Args with the run's options
    task: Any
    model: Any
    processor: Any


def resolve_run_checkpoint(save_dir: str, checkpoint: str) -> str:
    """``<best>`` / ``<last>`` (relative to save_dir) or an explicit path, resolved to a file."""
    from xdpx.cli import UserError
    from xdpx.train.checkpoints import CheckpointError, resolve_checkpoint

    spec = io.join(save_dir, checkpoint) if checkpoint in ("<best>", "<last>") else checkpoint
    try:
        return resolve_checkpoint(spec)
    except CheckpointError as e:
        raise UserError(f"checkpoint: {e}; train the run first or set checkpoint to an existing file "
                        "(e.g. <last> or save_dir/checkpoint-N.pt)") from e


def read_run_args(save_dir: str) -> Any:
    """The run's options from save_dir/args.py, as an Args object (attribute access)."""
    from xdpx.cli import UserError
    from xdpx.config.options import Args
    from xdpx.config.writers import ARGS_FILE, read_args

    path = io.join(save_dir, ARGS_FILE)
    if not io.exists(path):
        raise UserError(f"save_dir {save_dir!r} has no {ARGS_FILE}: is it an x-train run directory?")
    values = read_args(path)
    if values.get("user_dir"):
        from xdpx.registry import load_user_dir

        load_user_dir(values["user_dir"])
    return Args(values, {}, set(), {})


def load_run(save_dir: str, checkpoint: str = "<best>") -> LoadedRun:
    """Rebuild the run's task, model and processor and load the checkpoint's weights (strictly)."""
    from xdpx.cli import UserError
    from xdpx.data import processors
    from xdpx.tasks import tasks
    from xdpx.train.checkpoints import load_weights

    args = read_run_args(save_dir)
    path = resolve_run_checkpoint(save_dir, checkpoint)
    # The processor reads vocab.txt / target_map.txt from the run directory (x-train copied them), so
    # the export does not depend on the data directory still being where it was.
    vocab_dir = save_dir if io.exists(io.join(save_dir, "vocab.txt")) else args.data_dir
    processor = processors.get(args.processor)(args, data_dir=vocab_dir)
    task = tasks.get(args.get("task", "default"))(args)
    # The checkpoint supplies every weight: building the model must not read pretrained files again.
    if args.get("pretrained_model"):
        args.pretrained_model = None
    model = task.build_model()
    weights = load_weights(path)
    result = model.load_state_dict(weights, strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise UserError(f"{path} does not fit model {args.model!r} of {save_dir}: missing keys "
                        f"{result.missing_keys[:5]}, unexpected keys {result.unexpected_keys[:5]}")
    model.eval()
    return LoadedRun(save_dir, path, args, task, model, processor)
