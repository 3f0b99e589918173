"""Distillation losses: the student's logits against a teacher's (Hinton et al., 2015), plus the hard labels.

Per sample, with student logits s, teacher logits t, temperature T and weight ``alpha``:

    distill:      (1 - alpha) * T^2 * KL(softmax(t / T) || softmax(s / T)) + alpha * CE(s, label)
    bce_distill:  (1 - alpha) * T^2 * BCE(sigmoid(s / T), sigmoid(t / T)) + alpha * BCE(s, label)

summed over the batch (the trainer divides by the update's number of samples). T^2 keeps the soft part's
gradients at the scale of the hard part's when T changes. A sample without a label (an unlabelled corpus
scored by the teacher: target -100) has the soft part only; a batch without teacher logits (dev and test
files, x-eval) scores the hard labels alone, so the validation loss is the students' cross-entropy, the same
with and without a teacher. The teacher logits come in ``batch['teacher_logits']``: stored by x-prepro
(processors ``*_with_logits``) or computed by an online teacher (``task: distill, teacher: ...``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from xdpx.config.options import Option
from xdpx.config.ranges import above, in_range
from xdpx.data.processing import IGNORE_INDEX
from xdpx.losses import losses
from xdpx.losses.base import Loss, major_metric_rule, step_logs, target_type_rule
from xdpx.losses.classification import CLASSIFICATION_METRICS

DISTILL_OPTIONS = [
    Option("temperature", float, default=1.0, validate=above(0),
           doc="softmax temperature T of the soft part: teacher and student logits are divided by T (above 1 "
               "shows the student more of the teacher's ranking of the wrong classes); the soft part is "
               "multiplied by T^2 so its gradients keep their scale"),
    Option("alpha", float, default=0.5, validate=in_range(0, 1),
           doc="weight of the hard-label loss; the soft (teacher) part weighs 1 - alpha. Samples without a "
               "label (an unlabelled corpus scored by the teacher) have the soft part alone"),
    major_metric_rule(("classification",), CLASSIFICATION_METRICS),
    target_type_rule(regression=False),
]


class SoftTargetLoss(Loss):
    """Base of the logit distillation losses: ``soft`` and ``hard`` per sample, mixed by ``alpha``."""

    options = DISTILL_OPTIONS

    def soft(self, student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
        """T^2-scaled divergence of the student from the teacher, per sample ``[B]``."""
        raise NotImplementedError

    def hard(self, student: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Loss against the labels per sample ``[B]`` (rows without a label are ignored by the caller)."""
        raise NotImplementedError

    def compute(self, logits: torch.Tensor, target: torch.Tensor,
                teacher_logits: torch.Tensor | None = None) -> torch.Tensor:
        """The loss summed over the batch; without ``teacher_logits`` the hard part alone (weight 1)."""
        logits = logits.float()  # float32 even under autocast: a bf16 sum over a batch loses digits
        labelled = target != IGNORE_INDEX
        if teacher_logits is None:
            return self.hard(logits[labelled], target[labelled]).sum()
        alpha = float(self.args.alpha)
        total = (1.0 - alpha) * self.soft(logits, teacher_logits.float().to(logits.device)).sum()
        if alpha > 0 and bool(labelled.any()):
            total = total + alpha * self.hard(logits[labelled], target[labelled]).sum()
        return total

    def __call__(self, model: nn.Module, batch: dict[str, Any],
                 keep_outputs: bool = False) -> tuple[torch.Tensor, int, dict[str, Any]]:
        target = batch["target"]
        if target is None:  # a split with no labels at all: the soft part alone
            size = next(iter(batch["net_input"].values())).size(0)
            target = torch.full((size,), IGNORE_INDEX, dtype=torch.long)
        target = target.to(next(iter(batch["net_input"].values())).device)
        logits = model(**batch["net_input"])
        # validation and x-eval score the labels alone (no teacher needed, the same for every student)
        teacher = batch.get("teacher_logits") if getattr(model, "training", False) else None
        if teacher is None and not bool((target != IGNORE_INDEX).any()):
            raise ValueError("a batch with neither labels nor teacher logits: nothing to learn from (static "
                             "distillation needs processor *_with_logits data, online distillation a teacher)")
        loss_sum = self.compute(logits, target, teacher)
        sample_size = int(target.size(0)) if teacher is not None else int((target != IGNORE_INDEX).sum())
        outputs = (logits.detach(), target) if keep_outputs else None
        return loss_sum, sample_size, step_logs(loss_sum, int(target.size(0)), sample_size, outputs)


@losses.register("distill")
class DistillLoss(SoftTargetLoss):
    """Temperature-scaled KL divergence to the teacher's softmax, plus cross-entropy on the labels."""

    def soft(self, student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
        if student.shape != teacher.shape:
            raise ValueError(f"student logits {tuple(student.shape)} and teacher logits {tuple(teacher.shape)} "
                             "differ: the teacher must have the student's classes, in the same order")
        t = float(self.args.temperature)
        teacher_log_probs = F.log_softmax(teacher / t, dim=-1)
        kl = F.kl_div(F.log_softmax(student / t, dim=-1), teacher_log_probs, reduction="none", log_target=True)
        return kl.sum(-1) * (t * t)

    def hard(self, student: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(student, target.long(), reduction="none")


@losses.register("bce_distill")
class BCEDistillLoss(SoftTargetLoss):
    """For sigmoid (binary, one-vs-rest) teachers: binary cross-entropy to the teacher's temperature-scaled
    sigmoid, plus binary cross-entropy on the labels. One logit per sample ``[B]`` or one per class."""

    def soft(self, student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
        teacher = teacher.reshape(student.shape)
        t = float(self.args.temperature)
        per = F.binary_cross_entropy_with_logits(student / t, torch.sigmoid(teacher / t), reduction="none")
        return (per if per.dim() == 1 else per.sum(-1)) * (t * t)

    def hard(self, student: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        labels = target.float() if student.dim() == 1 else F.one_hot(target.long(), student.size(-1)).float()
        per = F.binary_cross_entropy_with_logits(student, labels, reduction="none")
        return per if per.dim() == 1 else per.sum(-1)
