"""A loss or gradient norm that is not finite: say where NaN/Inf first appeared and what to do.

Without fp16 the run stops with a UserError; the NaN detector (xdpx/debug/nan_detector.py) first re-runs
the failing update's forward/backward with hooks on the same data and step seed to name the first module
whose output was not finite. With fp16 an overflow lowers the loss scale and skips the update, until the
scale falls under min_loss_scale (xdpx/runtime/precision.py).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from xdpx.debug import NanDetector
from xdpx.errors import UserError
from xdpx.runtime.precision import LossScaleError, overflowing_parameters
from xdpx.runtime.seeding import seed_step
from xdpx.train.run_dir import resume_hint

if TYPE_CHECKING:
    from xdpx.train.loop import Trainer


def non_finite_error(loss: float, grad_norm: float, update: int, epoch: int, where: str,
                     hint: str) -> UserError:
    """The error that stops a run whose loss or gradient norm at ``update`` is not finite."""
    what = "the loss" if not math.isfinite(loss) else "the gradient norm"
    found = f" NaN detector: {where}." if where else ""
    return UserError(f"{what} is {loss if not math.isfinite(loss) else grad_norm} at update "
                     f"{update} (epoch {epoch}).{found} Lower the learning rate, check the "
                     f"data and the model, or set clip_norm. {hint}")


def locate_non_finite(trainer: Trainer, chunks: list[np.ndarray], dataset: Any,
                      loss_scale: float = 1.0) -> str:
    """Re-run the failing update's forward/backward with the NaN detector's hooks (same data, same
    step seed) and say where NaN/Inf first appeared; the weights are not changed."""
    trainer.optimizer.zero_grad(set_to_none=True)
    seed_step(trainer.seed, trainer.num_updates)
    try:
        with NanDetector(trainer.module) as detector:
            for indices in chunks:
                batch = trainer._to_device(trainer.processor.collate([dataset[int(j)] for j in indices]))
                with trainer.autocast:
                    loss, _, _ = trainer.task.train_step(trainer.module, batch)
                detector.check_loss(loss)
                (loss * loss_scale).backward()
                if detector.findings:
                    break
        report = detector.report()
    except Exception as error:  # the diagnosis must never hide the original problem
        report = f"could not re-run the update with hooks ({type(error).__name__}: {error})"
    finally:
        trainer.optimizer.zero_grad(set_to_none=True)
    trainer.log.info(f"NaN detector at update {trainer.num_updates + 1}: "
                     f"{report or 'no NaN/Inf on the re-run'}")
    return report


def skip_non_finite(trainer: Trainer, chunks: list[np.ndarray], dataset: Any, loss_sum: float,
                    grad_norm: float, loss_scale: float) -> None:
    """fp16: lower the loss scale and skip the update; else (or under min_loss_scale) a UserError."""
    if trainer.scaler is None:
        where = locate_non_finite(trainer, chunks, dataset)
        raise non_finite_error(loss_sum, grad_norm, trainer.num_updates + 1, trainer.epoch, where,
                               resume_hint(trainer.save_dir))
    try:
        trainer.scaler.update(overflow=True)
    except LossScaleError as e:
        names = ", ".join(overflowing_parameters(trainer.module)) or "(none: the loss itself is not finite)"
        where = locate_non_finite(trainer, chunks, dataset, loss_scale)
        hint = resume_hint(trainer.save_dir)
        raise UserError(f"{e}: gradients overflow at every update (parameters with inf/NaN "
                        f"gradients: {names}).{' NaN detector: ' + where + '.' if where else ''} Lower the "
                        f"learning rate, check the data, or use bf16. {hint}") from None
    trainer.log.info(f"fp16: gradient overflow at update {trainer.num_updates + 1}; loss scale -> "
                     f"{trainer.scaler.scale:g}, update skipped")
    trainer.optimizer.zero_grad(set_to_none=True)
