"""Saving a run and continuing it: state.pt, the full training state, and the weights checkpoints.

state.pt holds everything a resumed run needs to be bit for bit the run that never stopped: the model,
optimizer, schedule and loss scale, every random generator, the data position and counters, the
policies' and callbacks' states and how many rows of each log the state counts (docs/train.md). It is
written after the logs it counts, at every evaluation and at the end. checkpoint-<step>.pt holds the
weights only, written when the save policy says so, with checkpoints.json naming the best and the last.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from xdpx import io
from xdpx.errors import UserError
from xdpx.logger import log as summaries
from xdpx.losses.base import loss_state, restore_loss_state
from xdpx.models.checkpoints import checkpoint_name, full_state_name, save_torch, upgraded, write_index
from xdpx.runtime.run_files import STATE_FILE
from xdpx.runtime.seeding import rng_state, set_rng_state
from xdpx.train.ema import saved_weights
from xdpx.train.fsdp import full_model_state, full_optimizer_state, is_sharded, load_full_state
from xdpx.train.run_dir import check_resumable, write_run_files

if TYPE_CHECKING:
    from xdpx.train.loop import Trainer

STATE_VERSION = 1


def state_dict(trainer: Trainer) -> dict[str, Any]:
    """The full training state of ``trainer`` (what state.pt holds)."""
    t = trainer
    return {
        "version": STATE_VERSION,
        # plain, full state_dicts also under fsdp (gathered: xdpx/train/fsdp.py), so any run can load them
        "model": full_model_state(t.module),
        "optimizer": full_optimizer_state(t.module, t.optimizer),
        "scheduler": t.scheduler.state_dict(),
        "scaler": t.scaler.state_dict() if t.scaler else None,
        "rng": rng_state(),
        "counters": {"epoch": t.epoch, "offset": t.offset, "num_updates": t.num_updates,
                     "samples_seen": t.samples_seen, "last_eval_step": t.last_eval_step,
                     "finished": t.finished, "data_seed": t.data_seed, "update_size": t.update_size,
                     "batch_size": t.batch_size, "valid_batch_size": t.valid_batch_size,
                     "splits": list(t.batches.splits),
                     "cpu_threads": torch.get_num_threads(),
                     "time": dict(t.time),
                     # the signal that stopped the run (xdpx/train/preemption.py): x-train's own launcher
                     # reads it to tell a preempted run from a failed one. None once the run finished or
                     # paused, as the run marker says, even when a signal came at its end (loop.py)
                     "preempted_by": None if t.finished or t.stop == "pause" else t.preemption.signal_name},
        "early_stopping": t.early_stopping.state_dict(),
        "save_policy": t.save_policy.state_dict(),
        "bmuf": t.bmuf.state_dict() if t.bmuf is not None else None,
        "callbacks": t.callbacks.state_dict(),
        "ema": t.ema.state_dict() if t.ema is not None else None,  # the weight average (ema_decay)
        "loss": loss_state(t.task),  # e.g. ghmc's running bin counts
        "logs": {"train_rows": t.train_log.rows, "valid_rows": t.valid_log.rows,
                 "log_meter": dict(t.log_meter.sums), "eval_meter": dict(t.eval_meter.sums),
                 "train_columns": list(t.train_log.columns or []),
                 "valid_columns": list(t.valid_log.columns or []), "summaries": summaries.state_dict()},
    }


def save_state(trainer: Trainer) -> None:
    """Logs first, then state.pt: the state never counts rows that are not on disk. Under fsdp every
    process gathers (a collective); rank 0 writes."""
    sharded = is_sharded(trainer.module)
    if not trainer.context.is_main and not sharded:
        return
    state = state_dict(trainer)
    if not trainer.context.is_main:
        return
    for log in (trainer.train_log, trainer.valid_log, trainer.log.file):
        log.flush()
    save_torch(state, io.join(trainer.save_dir, STATE_FILE))


def restore(trainer: Trainer, state: dict[str, Any]) -> None:
    """Continue ``trainer`` from ``state`` (a state.pt it checks first) and rewrite the run's files."""
    t = trainer
    if isinstance(state, dict) and isinstance(state.get("model"), dict):  # a run of an earlier release
        state["model"] = upgraded(t.module, state["model"])
    check_resumable(state, t.module, t.optimizer, io.join(t.save_dir, STATE_FILE))
    if is_sharded(t.module):  # each process keeps its shard of the full state
        load_full_state(t.module, t.optimizer, state["model"], state["optimizer"])
    else:
        t.module.load_state_dict(state["model"])
        t.optimizer.load_state_dict(state["optimizer"])
    t.scheduler.load_state_dict(state["scheduler"])
    if t.scaler is not None and state["scaler"]:
        t.scaler.load_state_dict(state["scaler"])
    set_rng_state(state["rng"])
    c = state["counters"]
    t.epoch, t.offset, t.num_updates = c["epoch"], c["offset"], c["num_updates"]
    t.samples_seen, t.last_eval_step, t.finished = c["samples_seen"], c["last_eval_step"], c["finished"]
    t.data_seed, t.batch_size, t.time = c["data_seed"], c["batch_size"], dict(c["time"])
    t.valid_batch_size = c["valid_batch_size"]
    t.batches.seed, t.batches.splits = t.data_seed, list(c["splits"])
    if c["update_size"] != t.update_size:
        raise UserError(f"resume: this config makes updates of {t.update_size} samples, the saved run "
                        f"{c['update_size']} (batch_size x update_freq x processes): keep them as they were")
    t.early_stopping.load_state_dict(state["early_stopping"])
    t.save_policy.load_state_dict(state["save_policy"])
    t.callbacks.load_state_dict(state.get("callbacks"))
    if t.ema is not None:
        t.ema.load_state_dict(state.get("ema"), t.log.info)
    restore_loss_state(t.task, state.get("loss"))
    logs = state["logs"]
    t.train_log.load(keep=logs["train_rows"], columns=logs.get("train_columns"))
    t.valid_log.load(keep=logs["valid_rows"], columns=logs.get("valid_columns"))
    t.log_meter.sums, t.eval_meter.sums = dict(logs["log_meter"]), dict(logs["eval_meter"])
    summaries.load_state_dict(logs.get("summaries"))
    if t.context.is_main:
        write_run_files(t.args, t.save_dir, t.log.info)
    t.log.info(f"resumed from {STATE_FILE}: epoch {t.epoch}, update {t.num_updates}"
               + (f", batch_size {t.batch_size} (auto_ga)" if t.batch_size != t.args.batch_size else ""))
    saved_threads = c.get("cpu_threads")
    if saved_threads and saved_threads != torch.get_num_threads() and t.context.device.type == "cpu":
        # A CPU reduction split over another number of threads rounds differently (measured: 1.3e-7
        # between 1 and 2 threads on the tests' cls_cnn), so bitwise equality needs the same count.
        t.log.info(f"warning: resume: the run trained with {saved_threads} CPU threads, this process has "
                   f"{torch.get_num_threads()}: the result will match the uninterrupted run only to "
                   f"float rounding; set OMP_NUM_THREADS={saved_threads} for bit-for-bit")


def save_checkpoint(trainer: Trainer, is_best: bool, score: float | None = None) -> None:
    """checkpoint-<step>.pt (and state-<step>.pt), checkpoints.json, then delete what the policy drops
    (``score``: the evaluation's major metric, for keep_best_checkpoints). With ema_decay the checkpoint
    holds the averaged weights."""
    t, step = trainer, trainer.num_updates
    if is_sharded(t.module):  # gathered by every process (a collective); rank 0 writes
        weights = full_model_state(t.module)
        full = state_dict(t) if t.args.save_full_checkpoint else None
    elif t.context.is_main:
        weights, full = saved_weights(t), state_dict(t) if t.args.save_full_checkpoint else None
    if t.context.is_main:
        save_torch(weights, io.join(t.save_dir, checkpoint_name(step)))
        if full is not None:
            save_torch(full, io.join(t.save_dir, full_state_name(step)))
    outdated = t.save_policy.record(step, is_best, score)
    if t.context.is_main:  # the index first: a kill between the two never leaves it naming a deleted file
        best = t.save_policy.best_step
        write_index(t.save_dir, {"best": checkpoint_name(best) if best is not None else None,
                                 "last": checkpoint_name(step), "best_step": best,
                                 "best_score": t.early_stopping.best_score})
    for old in outdated:
        for name in (checkpoint_name(old), full_state_name(old)):
            path = io.join(t.save_dir, name)
            if t.context.is_main and io.exists(path):
                io.remove(path)
    t.callbacks.call("on_save", t._run_info, io.join(t.save_dir, checkpoint_name(step)))
