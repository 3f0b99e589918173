"""An online distillation teacher: a finished x-train run rebuilt inside a student's training (floor 2).

The teacher is read the way x-eval reads a run (xdpx/inference/loading.py) but from floor-2 parts only, as
a task may not import the workflows: its options from args.py (``ast.literal_eval``, never executed), its
task and model from the registries, its weights strictly from ``<best>`` (else ``<last>``) or the given
checkpoint file, its processor from the vocab.txt / target_map.txt the run directory keeps. The model
runs in eval mode under ``torch.no_grad``, so it is deterministic and a resumed student sees the same
teacher outputs (the teacher is rebuilt from the same files, not saved with the student).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from xdpx import io
from xdpx.config.options import Args
from xdpx.config.writers import read_args
from xdpx.data.composition import build_processor
from xdpx.data.processing import VOCAB_FILE
from xdpx.errors import UserError
from xdpx.models.checkpoints import BEST, LAST, CheckpointError, load_weights_into, resolve_checkpoint
from xdpx.models.choice import model_label
from xdpx.tasks import tasks

ARGS_FILE = "args.py"


@dataclass
class Teacher:
    """The teacher's options, model (eval mode, no gradients) and processor."""

    path: str  # the run directory
    checkpoint: str
    args: Any
    model: Any
    processor: Any

    def hidden_size(self) -> int | None:
        return self.args.get("hidden_size")


def run_dir_of(path: str) -> tuple[str, str | None]:
    """(run directory, checkpoint file or None for <best>/<last>) of a ``teacher:`` value."""
    base = path.rstrip("/")
    for alias in (BEST, LAST):
        if base.endswith(alias):
            return base[: -len(alias)].rstrip("/") or ".", base
    if io.exists(io.join(base, ARGS_FILE)):
        return base, None
    parent = base.rsplit("/", 1)[0] if "/" in base else "."
    return parent, base


def teacher_args(path: str) -> Any:
    """The teacher run's options as :class:`xdpx.config.options.Args` (args.py, read with literal_eval)."""
    run_dir, _ = run_dir_of(path)
    origin = io.join(run_dir, ARGS_FILE)
    if not io.exists(origin):
        raise UserError(f"teacher: {path!r} is not an x-train run directory (or a checkpoint file inside one): "
                        f"{origin} does not exist")
    return Args(read_args(origin), {}, set(), {})


def load_teacher(path: str, say: Any = print) -> Teacher:
    """Rebuild the teacher run at ``path`` (a run directory, ``<run>/<best>``, or a checkpoint file in it)."""
    run_dir, checkpoint = run_dir_of(path)
    args = teacher_args(path)
    try:
        if checkpoint is None:
            for alias in (BEST, LAST):
                try:
                    checkpoint = resolve_checkpoint(io.join(run_dir, alias))
                    break
                except CheckpointError:
                    continue
            else:
                raise CheckpointError(f"{run_dir} holds no checkpoint yet")
        else:
            checkpoint = resolve_checkpoint(checkpoint)
    except CheckpointError as e:
        raise UserError(f"teacher: {e}") from None
    # the teacher's own weights are loaded below: its pretrained_model is not read again
    with torch.random.fork_rng(devices=[]):  # building a model draws initial weights: keep the student's RNG
        model = tasks.get(args.get("task", "default"))(args).build_model()
    load_weights_into(model, checkpoint, strict=True, say=lambda _m: None,
                      hint=" (teacher: the checkpoint must be the teacher run's own)")
    model.eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    data_dir = run_dir if io.exists(io.join(run_dir, VOCAB_FILE)) else args.data_dir
    processor = build_processor(args, data_dir=data_dir)
    say(f"teacher: {model_label(args)} from {checkpoint}")
    return Teacher(run_dir, checkpoint, args, model, processor)


def same_tokenization(teacher: Teacher, student_args: Any, student_processor: Any) -> bool:
    """Whether the student's batches are the teacher's input as they are: same net_input fields, tokenizer,
    max_len and vocabulary (then no raw texts are needed)."""
    t, s = teacher.args, student_args
    if tuple(teacher.processor.fields) != tuple(student_processor.fields):
        return False
    if (t.get("tokenizer"), t.get("max_len"), t.get("lower")) != (s.get("tokenizer"), s.get("max_len"), s.get("lower")):
        return False
    return teacher.processor.dictionary.tokens == student_processor.dictionary.tokens
