"""``task: distill``: train a student on a teacher's outputs, read from the data (static) or computed online.

- Static: ``teacher: null``. The teacher's logits were written by ``x-pred`` (``distill: true``) and stored
  by x-prepro (processors ``single_with_logits`` / ``pair_with_logits``); each batch brings them as
  ``batch['teacher_logits']``.
- Online: ``teacher: <run dir, <run>/<best> or a checkpoint file>``. The teacher run is rebuilt at the first
  training step (xdpx/tasks/teacher.py: no workflow import) and runs in eval mode, without gradients,
  inside the trainer's autocast (bf16 when enabled), on the student's device. When the student's batches
  are not the teacher's input (another processor, tokenizer, max_len or vocabulary, e.g. a TextCNN student
  of a BERT teacher) the teacher's own processor encodes the raw texts, which x-prepro stored beside the
  student's tokens (``keep_texts: true``), so nothing of the text is lost to the student's tokenization.
  The teacher is deterministic, so a resumed run sees the same teacher outputs (exact resume holds).

Losses: ``distill`` and ``bce_distill`` on logits; ``tinybert`` adds hidden-state and attention matching
for BERT students (online only). Evaluation scores the labels alone and needs no teacher, so x-eval,
x-pred and x-serve of a student are those of any run of its model.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xdpx import io
from xdpx.config.options import Option, Rule
from xdpx.data.composition import build_processor
from xdpx.errors import UserError
from xdpx.models.distill_modules import BertInternals, attach_projection, width_of
from xdpx.tasks import tasks
from xdpx.tasks.default import Task
from xdpx.tasks.teacher import ARGS_FILE, load_teacher, run_dir_of, same_tokenization, teacher_args
from xdpx.tasks.teacher_checks import input_problem

DISTILL_LOSSES = ("distill", "bce_distill", "tinybert")


def _distill_loss(args: Any) -> bool:
    return args.loss in DISTILL_LOSSES


def _is_run(path: str) -> bool:
    return io.exists(io.join(run_dir_of(path)[0], ARGS_FILE))


@tasks.register("distill")
class DistillTask(Task):
    """A student trained against a teacher's logits (and, with loss tinybert, its hidden states)."""

    options = [
        Option("teacher", str, default=None,
               doc="online distillation: the teacher, an x-train run directory (its <best>, else <last>), "
                   "<run>/<best>, <run>/<last> or a checkpoint file of a run; it runs in eval mode inside "
                   "the student's training. null: static distillation from the teacher logits stored in "
                   "the data (x-pred distill: true, then x-prepro with processor single_with_logits / "
                   "pair_with_logits)"),
        Rule(_distill_loss, f"task distill trains with a distillation loss: set loss to one of "
                            f"{', '.join(DISTILL_LOSSES)}", keys=("task", "loss")),
        Rule(lambda a: a.teacher is None or _is_run(a.teacher),
             "teacher must be an x-train run directory holding args.py (or <run>/<best>, <run>/<last>, a "
             "checkpoint file inside a run directory)", keys=("teacher",)),
        Rule(lambda a: a.loss != "tinybert" or a.teacher is not None,
             "loss tinybert matches the teacher's hidden states and attention, which only an online teacher "
             "gives: set teacher: <the teacher run>", keys=("loss", "teacher")),
    ]

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self._teacher: Any = None
        self._reuse_inputs: bool | None = None

    def build_model(self) -> nn.Module:
        student = super().build_model()
        if getattr(self.loss, "wants_internals", False):
            attach_projection(student, width_of(self.args), width_of(teacher_args(self.args.teacher)))
        return student

    # ---- the online teacher ---------------------------------------------------------------------
    def teacher(self, device: torch.device) -> Any:
        """The teacher (loaded at the first use, then kept), on ``device``."""
        if self._teacher is None:
            self._teacher = load_teacher(self.args.teacher)
        if next(self._teacher.model.parameters()).device != device:
            self._teacher.model.to(device)
        return self._teacher

    def teacher_inputs(self, teacher: Any, batch: dict[str, Any], device: torch.device) -> dict[str, Any]:
        """The student's net_input when the teacher reads the same tokens, else the teacher's own
        encoding of the raw texts of the batch."""
        if self._reuse_inputs is None:
            student_processor = build_processor(self.args)
            self._reuse_inputs = same_tokenization(teacher, self.args, student_processor)
        if self._reuse_inputs:
            return batch["net_input"]
        texts = batch.get("texts")
        if texts is None:  # x-train's checks refuse this before any work; a teacher changed since lands here
            why = input_problem(teacher.args, self.args, teacher.path) or (
                "the student's batches are not the teacher's input, and the student's data keeps no raw texts. "
                "Preprocess the student's data with teacher_logits: true and keep_texts: true")
            raise UserError(f"teacher {self.args.teacher!r}: {why}")
        processor = teacher.processor
        collated = processor.collate([dict(processor.encode(list(t)), id=i) for i, t in enumerate(texts)])
        return {k: v.to(device) for k, v in collated["net_input"].items()}

    def with_teacher(self, model: nn.Module, batch: dict[str, Any]) -> dict[str, Any]:
        """``batch`` with ``teacher_logits`` (and ``teacher_internals`` for losses that match layers)."""
        if self.args.teacher is None:
            if batch.get("teacher_logits") is None:
                raise UserError("task distill without a teacher reads the teacher logits stored in the data, and "
                                "this batch has none: preprocess x-pred's distill: true output with teacher_logits: "
                                "true (or the processors single_with_logits / pair_with_logits), or set teacher: <run>")
            return batch
        device = next(model.parameters()).device
        teacher = self.teacher(device)
        inputs = self.teacher_inputs(teacher, batch, device)
        internals = None
        with torch.no_grad():
            if getattr(self.loss, "wants_internals", False):
                with BertInternals(teacher.model, attention=self.loss.wants_attention()) as internals:
                    logits = teacher.model(**inputs)
            else:
                logits = teacher.model(**inputs)
        return {**batch, "teacher_logits": logits.float(), "teacher_internals": internals}

    def train_step(self, model: nn.Module, batch: dict[str, Any]) -> tuple[torch.Tensor, int, dict[str, Any]]:
        return self.loss(model, self.with_teacher(model, batch))
