"""Evaluation during training, and what follows from it.

Each valid split is scored by the one evaluation function that x-eval uses too (xdpx/runtime/scoring.py),
so both give the same numbers for a checkpoint. The first split decides (major_metric, the best checkpoint,
early stopping); the others are logged beside it as ``<split>.<name>`` columns. After the scores come the
valid.log.tsv row, x-tune's pruner, the callbacks, the checkpoint the save policy asks for, state.pt and
the figures, in that order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from xdpx.logger import VALID
from xdpx.logger import log as summaries
from xdpx.logger import mode as summary_mode
from xdpx.runtime.out_of_memory import is_out_of_memory
from xdpx.runtime.scoring import evaluate as score_data
from xdpx.train.corpus_metrics import corpus_columns
from xdpx.train.drawing import draw
from xdpx.train.ema import evaluated_weights
from xdpx.train.fsdp import is_sharded
from xdpx.train.logs import summary_columns
from xdpx.train.saving import save_checkpoint, save_state

if TYPE_CHECKING:
    from xdpx.train.loop import Trainer


def evaluate(trainer: Trainer) -> dict[str, float]:
    """Loss, metrics and accumulative summaries on each valid split: the first split's as they are,
    the others' as ``<split>.<name>`` (the columns of valid.log.tsv)."""
    metrics: dict[str, float] = {}
    for i, (name, data) in enumerate(trainer.valid_sets):
        summaries.begin_evaluation()
        # accumulative summaries of the model and loss code; with ema_decay, the averaged weights
        with summary_mode(VALID), evaluated_weights(trainer):
            values = evaluate_with_auto_ga(trainer, data)
        reserved = [*values, "epoch", "step", "samples", "train_loss", f"best_{trainer.args.major_metric}",
                    "best_step"]
        values.update(summary_columns(summaries.end_evaluation(), reserved))
        metrics.update({(f"{name}." if i else "") + key: value for key, value in values.items()})
    if getattr(trainer, "eval_corpus", None) is not None:  # eval_corpus: corpus.<metric> columns
        with evaluated_weights(trainer):
            metrics.update(corpus_columns(trainer, trainer.eval_corpus))
    return metrics


def evaluate_with_auto_ga(trainer: Trainer, data: Any) -> dict[str, float]:
    """Loss and metrics on ``data`` (with several processes each scores its share of the batches and the
    outputs are gathered: every rank gets the one-process numbers). With auto_ga, out-of-memory halves
    the evaluation batch and starts the evaluation again."""
    while True:
        try:
            return score_split(trainer, data, trainer.valid_batch_size)
        except Exception as error:
            if not (trainer.args.auto_ga and is_out_of_memory(error) and trainer.valid_batch_size > 1):
                raise
            trainer.valid_batch_size = (trainer.valid_batch_size + 1) // 2
            trainer.log.info(f"auto_ga: out of memory in evaluation: valid_batch_size -> "
                             f"{trainer.valid_batch_size}")


def score_split(trainer: Trainer, data: Any, batch_size: int) -> dict[str, float]:
    """Loss and metrics of the trainer's model on ``data``; the model is back in training mode after."""
    # The one evaluation function, shared with x-eval: both give the same numbers for a checkpoint.

    t = trainer
    # a sharded model (fsdp) gathers its weights in each forward, so every process must run the same
    # batches: each scores the whole split (the same numbers on each) instead of its share
    context = None if is_sharded(t.module) else t.context
    # per-sample randomness of evaluation (MLM masks) is drawn as x-eval draws it, at epoch 0, so every
    # evaluation of a run scores the same masks and x-eval of a checkpoint gives its valid.log.tsv row
    epoch = t.processor.epoch
    t.processor.set_epoch(0)
    try:
        metrics = score_data(t.task, t.module, t.processor, data, batch_size, t.autocast, t._to_device,
                             t.args.max_eval_steps, context=context)
    finally:
        t.processor.set_epoch(epoch)
    t.module.train()
    return metrics


def evaluate_and_save(trainer: Trainer, final: bool = False) -> None:
    """Evaluate, log it, tell early stopping, x-tune and the callbacks; then checkpoint, state.pt, figures."""
    t, a, step = trainer, trainer.args, trainer.num_updates
    if t.bmuf is not None:  # a block boundary: every process evaluates and saves the same model
        t.bmuf.sync(step)
    metrics = evaluate(t) if t.valid_sets else None
    score = metrics[a.major_metric] if metrics else None
    is_best = t.early_stopping.update(score, step) if score is not None else False
    if metrics is not None:
        row = {"epoch": t.epoch, "step": step, "samples": t.samples_seen, **metrics,
               "train_loss": t.eval_meter.mean_loss(), f"best_{a.major_metric}": t.early_stopping.best_score,
               "best_step": t.early_stopping.best_step}
        t.valid_log.write(row)
        if t.tensorboard is not None:
            t.tensorboard.write("valid", row)
        t.log.info(f"eval at update {step} (epoch {t.epoch}) on "
                   f"{describe(t.valid_sets, metrics, a.major_metric)}{' (best)' if is_best else ''}")
        if t.trial_reporter is not None:
            t.pruned = t.trial_reporter.after_evaluation(
                t.samples_seen, score, t.early_stopping.best_score, t.early_stopping.best_step)
            if t.pruned:
                t.log.info(f"x-tune: the pruner stops this trial at update {step}")
        t.callbacks.call("on_evaluation", t._run_info, row)
    t.eval_meter.reset()
    t.last_eval_step = step
    if t.save_policy.should_save(score, is_best, final):
        save_checkpoint(t, is_best, score)
    save_state(t)
    draw(t, final)


def describe(valid_sets: list[tuple[str, Any]], metrics: dict[str, float], major_metric: str) -> str:
    """``dev: loss 0.41, accuracy 0.83; test: loss ...`` for the log."""
    others = [f"{name}." for name, _ in valid_sets[1:]]
    parts = []
    for i, (name, _) in enumerate(valid_sets):
        mine = {k[len(others[i - 1]):] if i else k: v for k, v in metrics.items()
                if (k.startswith(others[i - 1]) if i else not k.startswith(tuple(others)))}
        if i:  # the other splits: loss and the major metric (all their metrics are in valid.log.tsv)
            mine = {k: v for k, v in mine.items() if k in ("loss", major_metric)}
        parts.append(f"{name}: " + ", ".join(f"{k} {v:.4g}" for k, v in mine.items()))
    return "; ".join(parts)
