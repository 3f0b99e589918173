"""The training loop of x-train. Read :meth:`Trainer.fit` top to bottom: data, forward/backward over the
micro-batches of an update, normalisation by the update's sample count, clipping, optimizer step, logs,
evaluation, saving and stopping, in that order. Decisions (when to evaluate, save, stop) are asked of
the small policy objects in policies.py; the full state they and the loop keep is saved in state.pt so
that a resumed run is bit for bit the run that never stopped (docs/train.md).

The rest lives beside it: building the run (setup.py), evaluating and what follows (evaluation.py),
state.pt and checkpoints (saving.py), the run directory's files (run_dir.py), the figures (drawing.py),
a loss that is not finite (non_finite.py), the weight average of ema_decay (ema.py).
"""

from __future__ import annotations

import contextlib
import math
import shlex
import time
from typing import Any

import numpy as np
import torch

from xdpx import io
from xdpx.config.loader import STDIN_NAME
from xdpx.errors import UserError
from xdpx.logger import TRAIN
from xdpx.logger import log as summaries
from xdpx.logger import mode as summary_mode
from xdpx.models.choice import model_label
from xdpx.runtime import distributed
from xdpx.runtime.devices import batch_to_device
from xdpx.runtime.out_of_memory import is_out_of_memory
from xdpx.runtime.precision import normalise_and_clip, optimizer_step
from xdpx.runtime.seeding import derived_seed, seed_step
from xdpx.train.batching import micro_batches, rank_share
from xdpx.train.callbacks import Callbacks, RunInfo
from xdpx.train.corpus_metrics import read_eval_corpus
from xdpx.train.drawing import normalised_gradient_stats
from xdpx.train.ema import weight_average
from xdpx.train.evaluation import evaluate, evaluate_and_save
from xdpx.train.fsdp import describe_shares, is_sharded
from xdpx.train.logs import Meter, Progress, TsvLog, summary_columns
from xdpx.train.non_finite import skip_non_finite
from xdpx.train.preemption import Preempted, handlers_restored_on_error, run_watch, signal_note
from xdpx.train.run_dir import continue_command, note_preemption, outage_message, write_run_files
from xdpx.train.saving import restore, save_checkpoint, save_state
from xdpx.train.setup import (
    build_components,
    build_policies,
    build_scheduler,
    open_data,
    open_run,
    open_tensorboard,
    seed_run,
    wrap_model,
)
from xdpx.tune import trial_reporter_from_env


def train(args: Any) -> None:
    """Run x-train for resolved ``args`` (the command has checked them)."""
    trainer = None
    try:
        with handlers_restored_on_error():  # a failed run leaves no preemption handler behind
            trainer = Trainer(args)
            trainer.fit()
    except io.StoreUnavailableError as error:  # the store stayed away past the retry window
        raise UserError(outage_message(error, args, getattr(trainer, "save_dir", None))) from None
    if trainer.stop == "preempted":  # state saved: exit EXIT_REQUEUE (the job is requeued)
        raise Preempted()


class Trainer:
    """Builds everything from ``args`` (or restores it from save_dir/state.pt), then :meth:`fit`."""

    def __init__(self, args: Any) -> None:
        self.args = a = args
        self.context = ctx = distributed.setup(a.cpu)
        # SIGUSR1 / SIGTERM: finish the update, save the state, exit EXIT_REQUEUE (preemption.py); noted since the
        # x-train step started (a signal while building stops at the first boundary), else from here
        self.preemption, self.own_watch = run_watch()
        self.stop: str | None = None  # why fit ended (_finish)
        self.save_dir, self.log, state = open_run(a, ctx)

        # randomness: init from seed; data order from (seed, epoch); step randomness from (seed, update)
        self.seed, self.data_seed = a.seed, seed_run(a.seed)
        self.task, self.module, self.processor, self.optimizer, self.scaler, self.autocast = build_components(
            a, ctx.device, self.log.info, load_pretrained=state is None)
        self.ema = weight_average(a, self.module, self.log.info)  # ema_decay (xdpx/train/ema.py), else None
        self.update_size = a.batch_size * a.update_freq * ctx.world_size  # samples per update, all ranks
        self.batch_size = a.batch_size  # per forward pass; auto_ga halves it
        self.valid_batch_size = a.valid_batch_size
        self.batches, self.valid_sets, self.total_updates = open_data(a, self.data_seed, self.update_size,
                                                                      self.log.info)
        self.eval_corpus = read_eval_corpus(a)  # eval_corpus: its BEIR set, scored at each evaluation (or None)
        self.scheduler = build_scheduler(a, self.total_updates, self.log.info)

        # policies and logs
        self.eval_schedule, self.early_stopping, self.save_policy, self.loss_limit = build_policies(a)
        self.callbacks = Callbacks(a.callbacks, a)
        # an x-tune trial reports each evaluation to its study and stops when pruned (else None)
        self.trial_reporter = trial_reporter_from_env() if ctx.is_main else None
        self.pruned = False
        self.train_log = TsvLog(io.join(self.save_dir, "train.log.tsv"), ctx.is_main)
        self.valid_log = TsvLog(io.join(self.save_dir, "valid.log.tsv"), ctx.is_main)
        self.log_meter, self.eval_meter = Meter(), Meter()
        summaries.reset()  # user summaries (xdpx.logger.log): their running sums are in the state
        self.gradient_stats: Any = None  # inspect_gradient: |grad| per parameter of the update before an eval
        self.last_plot = time.perf_counter()

        # counters: the data position is (epoch, offset = update groups of the epoch done)
        self.epoch, self.offset, self.num_updates, self.samples_seen = 1, 0, 0, 0
        self.last_eval_step, self.finished = -1, False
        self.time = {"data": 0.0, "compute": 0.0, "total": 0.0}

        if state is not None:
            restore(self, state)
        else:
            self.train_log.load(keep=0)
            self.valid_log.load(keep=0)
            if ctx.is_main:
                write_run_files(a, self.save_dir, self.log.info)
        self.tensorboard = open_tensorboard(a, ctx, self.save_dir, self.num_updates + 1 if state else None)
        self.bmuf = distributed.block_sync(a, self.module, self.optimizer, ctx, state, self.log.info)  # use_bmuf
        self.model = wrap_model(self.module, ctx, self.bmuf)

    # ------------------------------------------------------------------------------------------------
    def fit(self) -> None:
        """Train until max_update / max_epoch, early stopping, or a train_steps pause."""
        a, log = self.args, self.log
        if self.finished:
            log.info(f"{self.save_dir} is finished (update {self.num_updates}); nothing to do")
            return self.close()
        log.info(f"training {model_label(a)} on {a.data_dir} ({', '.join(self.batches.splits)}) into {self.save_dir}: "
                 f"{self.total_updates} updates of {self.update_size} samples, from update {self.num_updates}")
        progress = Progress(self.total_updates, self.num_updates, self.context.is_main)
        log.progress = progress
        self.callbacks.call("on_train_start", self._run_info)
        stop = self._stop_at_boundary()
        while stop is None:
            self.processor.set_epoch(self.epoch)
            for dataset, group in self.batches.epoch(self.epoch, self.update_size, start=self.offset):
                started = time.perf_counter()
                # one update: forward/backward over this rank's micro-batches, normalise, clip, step
                stats = self._update_with_auto_ga(dataset, group)
                self.offset += 1
                if stats is not None:  # None: fp16 overflow, the update was skipped
                    self.num_updates += 1
                    self.samples_seen += stats["nsamples"]
                    for meter in (self.log_meter, self.eval_meter):
                        meter.add(**{k: stats[k] for k in ("loss", "sample_size", "nsamples", "grad_norm",
                                                           "clipped")}, updates=1)
                    progress.update({"loss": stats["loss"] / max(stats["sample_size"], 1), "lr": stats["lr"]})
                    self.loss_limit.check(stats["loss"] / max(stats["sample_size"], 1), self.num_updates)
                self.log_meter.add(seconds=time.perf_counter() - started)

                if stats is not None and self.num_updates % a.log_interval == 0:
                    self._log_train_row()
                if stats is not None:
                    self.callbacks.call("on_update", self._run_info, stats)
                requested = self.callbacks.take_evaluation_request()  # a callback asked for one
                if stats is not None and (self.eval_schedule.due(self.num_updates) or requested):
                    evaluate_and_save(self)
                stop = self._stop_at_boundary()
                self.time["total"] += time.perf_counter() - started
                if stop is not None:
                    break
            else:  # the epoch is complete
                if self.eval_schedule.due_at_epoch_end() and self.last_eval_step != self.num_updates:
                    evaluate_and_save(self)
                    stop = self._stop_at_boundary()
                if stop is None:
                    self.epoch, self.offset = self.epoch + 1, 0

        progress.close()
        log.progress = None
        self._finish(stop)

    def _finish(self, stop: str) -> None:
        """The end of fit: the last evaluation (or, at a pause, a checkpoint), state.pt, the summary line."""
        a, log, self.stop = self.args, self.log, stop
        if stop == "pause":
            log.info(f"paused at update {self.num_updates} (train_steps); continue with resume: true")
            if a.save:
                save_checkpoint(self, is_best=False)
        elif stop != "preempted" and self.last_eval_step != self.num_updates:
            if self.preemption.share(self.context):  # came in the last update (every rank alike: fsdp saves together)
                self._save_preempted()
            evaluate_and_save(self, final=True)
        self.finished = stop not in ("pause", "preempted")
        save_state(self)
        if is_sharded(self.module):  # what sharding saved (a collective)
            log.info(describe_shares(self.module, self.optimizer, self.context))
        if self.context.is_main:  # the same command continues a preempted run, even without resume: true
            note = signal_note(self.preemption, self.num_updates)  # a late signal: the same command has nothing to do
            note_preemption(self.save_dir, note if stop == "preempted" else None, note if self.finished else None)
        if stop == "preempted":  # no evaluation, no checkpoint: the rerun makes those the run would have made
            log.info(f"preempted: {self.preemption.signal_name} received; stopped after update {self.num_updates} "
                     f"(epoch {self.epoch}) with the full training state saved in {io.join(self.save_dir, 'state.pt')}; "
                     f"exit code 3 (a job script of x-submit requeues the job). To continue, {self._continue_hint()}")
        t = self.time
        status = ("stopped" if stop in ("early_stop", "callback", "max_loss") else stop
                  if stop in ("pruned", "preempted") else "done" if self.finished else "paused")
        if self.preemption.received is not None and stop != "preempted":
            log.info(f"{self.preemption.signal_name} received as the run reached its end: it is not stopped for a "
                     f"requeue but {status}, with its final state saved (exit code 0)")
        if stop == "callback":
            log.info(f"a callback stopped training: {self.callbacks.stop_reason}")
        if stop == "max_loss":
            log.info(self.loss_limit.message)
        best = self.early_stopping
        best_said = (f"best {a.major_metric} {best.best_score} at update {best.best_step}" if best.best_step is not None
                     else "no evaluation yet")
        log.info(f"{status}: "
                 f"{self.num_updates} updates, {self.samples_seen} samples; {best_said}; training time "
                 f"{t['total']:.1f}s, of which forward/backward/step {t['compute']:.1f}s, batching {t['data']:.1f}s")
        self.callbacks.call("on_train_end", self._run_info, status)
        self.close()

    def _save_preempted(self) -> None:
        """A signal came in the last update: the state and marker of a preempted stop, before the final
        evaluation, so that a kill before the end is saved leaves a run the same command continues."""
        save_state(self)
        if self.context.is_main:
            note_preemption(self.save_dir, signal_note(self.preemption, self.num_updates))

    def _stop_reason(self) -> str | None:
        if self.num_updates >= self.total_updates:
            return "done"
        if self.loss_limit.exceeded:
            return "max_loss"
        if self.early_stopping.should_stop:
            return "early_stop"
        if self.pruned:
            return "pruned"
        if self.callbacks.stop_reason is not None:
            return "callback"
        if self.args.train_steps is not None and self.num_updates >= self.args.train_steps:
            return "pause"
        return "preempted" if self.preemption.received is not None else None

    def _continue_hint(self) -> str:
        a = self.args
        if self.save_dir != a.save_dir:  # auto_suffix chose the folder: the same command would choose another
            return continue_command(a, self.save_dir)
        config = "- < the same config" if a.origin() == STDIN_NAME else shlex.quote(a.origin())
        return f"run the same command again (the run marker makes it resume): x-train {config}"

    def _stop_at_boundary(self) -> str | None:
        """The stop reason between two updates, where every rank is at the same point of the loop: a
        preemption signal that reached any rank is shared first (a collective: preemption.py)."""
        self.preemption.share(self.context)
        return self._stop_reason()

    def _run_info(self) -> RunInfo:
        """What callbacks see of the run (read-only), with the control they may use."""
        return RunInfo(self.args, self.save_dir, self.context.is_main, self.epoch, self.num_updates,
                       self.total_updates, self.samples_seen, self.early_stopping.best_score,
                       self.early_stopping.best_step, self.module, self.callbacks.control)

    # ---- one update ------------------------------------------------------------------------------------
    def _update_with_auto_ga(self, dataset: Any, group: np.ndarray) -> dict[str, Any] | None:
        """The update of ``group``; with auto_ga, out-of-memory halves the micro-batch and redoes it."""
        while True:
            try:
                return self._update(dataset, group)
            except Exception as error:
                if not (self.args.auto_ga and is_out_of_memory(error) and self.batch_size > 1):
                    raise
                self.optimizer.zero_grad(set_to_none=True)
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
                self.batch_size = (self.batch_size + 1) // 2
                self.log.info(f"auto_ga: out of memory at update {self.num_updates + 1}: batch_size -> "
                              f"{self.batch_size}, update_freq -> {self.update_freq} (same {self.update_size} "
                              "samples per update); redoing the update")

    @property
    def update_freq(self) -> int:
        return math.ceil(self.update_size / self.context.world_size / self.batch_size)

    def _update(self, dataset: Any, group: np.ndarray) -> dict[str, Any] | None:
        """One optimizer update on ``group``: forward/backward over this rank's micro-batches, the sums
        over the ranks, normalisation by the update's sample count, clipping, the step (None: skipped)."""
        ctx = self.context
        seed_step(self.seed, self.num_updates)
        if hasattr(self.task, "set_num_updates"):  # FreeLB's adv_begin_iter
            self.task.set_num_updates(self.num_updates)
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        share, stand_in = rank_share(group, ctx.rank, ctx.world_size)
        chunks = micro_batches(share, self.batch_size)
        loss_scale = self.scaler.scale if self.scaler else 1.0
        # auto_ga with several processes: gradients are synced only once every rank's backward succeeded,
        # so that an out-of-memory on one rank reaches all of them before any gradient sync
        sync_late = ctx.distributed and self.args.auto_ga
        loss_total, sample_size, nsamples, out_of_memory = self._forward_backward(dataset, chunks, stand_in,
                                                                                  loss_scale, sync_late)
        t2 = time.perf_counter()
        # normalise by the real sample count of the whole update (all micro-batches, all ranks; BMUF: this rank's)
        normaliser = sample_size * loss_scale if self.bmuf is not None else None
        loss_sum, sample_size, nsamples, out_of_memory = distributed.all_reduce_sum(
            [float(loss_total), float(sample_size), float(nsamples), out_of_memory], ctx)
        if out_of_memory:  # every rank raises it: auto_ga halves the batch everywhere and redoes the update
            raise torch.OutOfMemoryError(f"out of memory on {out_of_memory:.0f} of {ctx.world_size} processes")
        if sync_late and self.model is not self.module:
            distributed.all_reduce_gradients([p for p in self.module.parameters() if p.requires_grad], ctx)
        grads = [p.grad for p in self.module.parameters() if p.grad is not None]
        factor = 1.0
        if sample_size > 0:
            factor = 1 / normaliser if normaliser else ctx.world_size / (sample_size * loss_scale)
        if self.args.inspect_gradient and (self.eval_schedule.due(self.num_updates + 1)
                                           or self.num_updates + 1 >= self.total_updates):
            stats = normalised_gradient_stats(self.module, grads, factor)  # drawn after the evaluation
            self.gradient_stats, factor = (self.num_updates + 1, stats), 1.0
        clip = self.args.clip_norm or 0.0
        grad_norm, scale, divide_in_step = normalise_and_clip(grads, factor, clip, self.optimizer)
        if not (math.isfinite(grad_norm) and math.isfinite(loss_sum)):
            return skip_non_finite(self, chunks, dataset, loss_sum, grad_norm, loss_scale)  # or raises
        if self.scaler is not None:
            self.scaler.update(overflow=False)
        lr = self.scheduler.step_update(self.optimizer, self.num_updates)
        optimizer_step(self.optimizer, grads, scale, divide_in_step)
        if self.bmuf is not None:
            self.bmuf.after_update(self.num_updates + 1)
        if self.ema is not None:
            self.ema.update(self.module)
        self.time["compute"] += time.perf_counter() - t2
        return {"loss": loss_sum, "sample_size": sample_size, "nsamples": int(nsamples), "grad_norm": grad_norm,
                "clipped": float(clip > 0 and grad_norm > clip), "lr": lr}

    def _forward_backward(self, dataset: Any, chunks: list[np.ndarray], stand_in: bool, loss_scale: float,
                          sync_late: bool) -> tuple[torch.Tensor, int, int, float]:
        """Forward and backward of each micro-batch, the gradients summed in ``.grad``; (loss sum,
        sample_size, nsamples, 1.0 when out of memory with ``sync_late`` (the sums until then), else 0.0)."""
        model = self.model
        ddp = model is not self.module  # with BMUF each process trains its own copy (no gradient sync)
        loss_total = torch.zeros((), dtype=torch.float64)
        sample_size = nsamples = 0
        try:
            for i, indices in enumerate(chunks):
                t0 = time.perf_counter()
                batch = self._to_device(self.processor.collate([dataset[int(j)] for j in indices]))
                if stand_in:  # a loss that gathers across processes (info_nce gather_negatives) leaves it out
                    batch["stand_in"] = True
                t1 = time.perf_counter()
                last = i == len(chunks) - 1
                with model.no_sync() if ddp and (sync_late or not last) else contextlib.nullcontext():
                    with self.autocast, summary_mode(TRAIN):
                        loss, size, logs = self.task.train_step(model, batch)
                    if stand_in:  # a rank without samples in a short last group still joins the sync
                        loss, size, logs = loss * 0.0, 0, {**logs, "loss": logs["loss"] * 0.0, "nsamples": 0}
                    (loss * loss_scale).backward()
                loss_total += logs["loss"].detach().double().cpu()
                sample_size += size
                nsamples += logs["nsamples"]
                self.time["data"] += t1 - t0
                self.time["compute"] += time.perf_counter() - t1
        except Exception as error:
            if not (sync_late and is_out_of_memory(error)):
                raise
            return loss_total, sample_size, nsamples, 1.0
        return loss_total, sample_size, nsamples, 0.0

    def _log_train_row(self) -> None:
        m = self.log_meter.sums
        updates = max(m["updates"], 1)
        per_update = m["seconds"] / max(m["updates"], 1)
        row = {"epoch": self.epoch, "step": self.num_updates, "samples": self.samples_seen,
               "loss": self.log_meter.mean_loss(), "grad_norm": m["grad_norm"] / updates,
               "clip_rate": m["clipped"] / updates, "lr": self.optimizer.param_groups[0]["lr"],
               "samples_per_s": m["nsamples"] / m["seconds"] if m["seconds"] else None,
               "loss_scale": self.scaler.scale if self.scaler else None,
               "batch_size": self.batch_size, "update_freq": self.update_freq}
        row.update(summary_columns(summaries.train_means(), row))
        self.train_log.write(row)
        if self.tensorboard is not None:
            self.tensorboard.write("train", row)
        eta = (self.total_updates - self.num_updates) * per_update
        self.log.info(f"epoch {self.epoch} | update {self.num_updates}/{self.total_updates} | loss "
                      f"{row['loss']:.4f} | lr {row['lr']:.3g} | {row['samples_per_s'] or 0:.0f} samples/s | "
                      f"ETA {eta / 60:.1f} min", console=self.log.progress is None or self.log.progress.bar is None)
        self.log_meter.reset()

    def _to_device(self, batch: dict[str, Any]) -> dict[str, Any]:
        return batch_to_device(batch, self.context.device)

    def evaluate(self) -> dict[str, float]:
        """Loss, metrics and summaries on each valid split (xdpx/train/evaluation.py)."""
        return evaluate(self)

    def close(self) -> None:
        if self.own_watch:  # else the x-train step's (watching_from_start) restores the handlers
            self.preemption.uninstall()
        if self.stop == "preempted":  # the process exits EXIT_REQUEUE: no second signal kills it
            self.preemption.ignore_from_now()
        if self.tensorboard is not None:
            self.tensorboard.close()
        summaries.reset()
        del self.model, self.module, self.optimizer  # DDP must be gone before the process group
        distributed.teardown(self.context)


__all__ = ["Trainer", "derived_seed", "train"]
