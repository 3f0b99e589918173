"""Building a run from its options: the run directory and its log, the seeds, the model with its
optimizer and precision, the data and the number of updates, the schedule and the policies.

The Trainer (xdpx/train/loop.py) calls these in this order, which is part of the run: the model's
initial weights are drawn from the generators :func:`seed_run` seeds.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch

from xdpx import io
from xdpx.data.composition import build_processor
from xdpx.data.dataset import open_split
from xdpx.errors import UserError
from xdpx.models.checkpoints import load_torch, load_weights_into, resolve_checkpoint
from xdpx.models.lora import add_lora
from xdpx.runtime.compiling import compile_module
from xdpx.runtime.distributed import Context
from xdpx.runtime.precision import DynamicLossScaler, autocast
from xdpx.runtime.run_files import STATE_FILE, available_splits, match_subsets, subsets
from xdpx.runtime.seeding import seed_everything
from xdpx.train.batching import TrainBatches, updates_per_epoch
from xdpx.train.checks import valid_in_training, without_valid
from xdpx.train.fsdp import is_sharded, shard_model
from xdpx.train.logs import RunLog
from xdpx.train.policies import EarlyStopping, EvalSchedule, LossLimit, SavePolicy
from xdpx.train.run_dir import shared_run_dir
from xdpx.train.shards import ShardWaiter, planned_shards, ready_splits
from xdpx.utils.cpu_memory import keep_freed_memory
from xdpx.viz import TensorBoardMirror


def component(args: Any, key: str) -> Any:
    """What option ``key`` names, from the registry the option declares (a user_dir may add to it)."""
    return args.option(key).registry.get(args.get(key))


def open_run(args: Any, context: Context) -> tuple[str, RunLog, dict[str, Any] | None]:
    """The run directory, its log (log.txt) and, with resume, the saved state to continue (else None)."""
    save_dir, notes = shared_run_dir(args, context)
    log = RunLog(io.join(save_dir, args.log_file) if args.log_file else None, context.is_main)
    log.file.load()
    for note in notes:
        log.info(note)
    state_path = io.join(save_dir, STATE_FILE)
    state = load_torch(state_path) if args.resume and io.exists(state_path) else None
    return save_dir, log, state


def seed_run(seed: int | None) -> int:
    """Seed every generator from ``seed`` (the initial weights); the data seed: ``seed``, else a fresh one."""
    if seed is not None:
        seed_everything(seed)
    return seed if seed is not None else int(np.random.SeedSequence().entropy % (1 << 62))


class Components(NamedTuple):
    """What :func:`build_components` builds, in the order it builds them."""

    task: Any
    module: torch.nn.Module
    processor: Any
    optimizer: Any
    scaler: DynamicLossScaler | None
    autocast: Any


def build_components(args: Any, device: torch.device, say: Any, load_pretrained: bool) -> Components:
    """The task, its model on ``device`` (pretrained unless resuming), processor, optimizer, precision."""
    a = args
    task = component(a, "task")(a)
    module = task.build_model()
    if load_pretrained and a.get("pretrained_model"):
        if hasattr(module, "load_pretrained"):  # e.g. BERT: Hugging Face directories, TF checkpoints
            module.load_pretrained(a.pretrained_model, say)
        else:
            load_weights_into(module, resolve_checkpoint(a.pretrained_model), strict=False, say=say,
                              hint=" Check pretrained_model and the model options")
    if a.get("lora") is not None:  # ({} = the defaults) after the pretrained weights; on resume before the saved state (xdpx/models/lora.py)

        add_lora(module, a, say)
    module = module.to(device)
    if device.type == "cpu":  # reuse the large blocks every update frees (xdpx/utils/cpu_memory.py)
        keep_freed_memory()
    if a.compile:  # in place: the state_dict keys stay the model's own

        compile_module(module, say)
    if a.fsdp:  # before the optimizer: FSDP2 replaces the parameters by their shards (xdpx/train/fsdp.py)

        shard_model(module, device, a.fsdp_sharding, say)
    processor = build_processor(a)
    optimizer = component(a, "optimizer").build(a, module)
    scaler = DynamicLossScaler(a.fp16_init_scale, tolerance=a.fp16_scale_tolerance,
                               threshold=a.threshold_loss_scale, min_scale=a.min_loss_scale) \
        if a.fp16 else None
    mixed = autocast(device, a.fp16, a.bf16)
    if a.fp16 and device.type == "cpu":
        say("warning: fp16 on the CPU is slow and meant for tests; use bf16 on CPUs")
    return Components(task, module, processor, optimizer, scaler, mixed)


def open_data(args: Any, data_seed: int, update_size: int,
              say: Any) -> tuple[TrainBatches, list[tuple[str, Any]], int]:
    """The training batches, the valid splits (name, dataset) and the number of updates the run makes."""
    a = args
    splits, _ = match_subsets(a.train_subset, available_splits(a.data_dir))
    waiter, coming = None, []
    if a.lazy_load:  # shards x-prepro still writes: training waits for each when it gets there
        splits, coming = planned_shards(a.train_subset, ready_splits(a.data_dir))
        waiter = ShardWaiter(a.data_dir, a.lazy_load_wait, say).wait
    splits, excluded = without_valid(a, splits)
    warning = valid_in_training(a, splits)
    if warning:  # in log.txt; on stderr from the command (xdpx/train/command.py)
        say(warning, console=False)
    if excluded:
        left_out = sum(len(open_split(a.data_dir, s)) for s in excluded)
        say(f"exclude_valid_from_train: left {len(excluded)} valid split(s) {excluded} ({left_out} samples) out "
            f"of the training splits {splits}")
    batches = TrainBatches(lambda s: open_split(a.data_dir, s), splits, a.lazy_load, data_seed, waiter)
    sizes = [len(open_split(a.data_dir, s)) for s in splits if s not in coming]
    if not splits or sum(sizes) == 0 and not coming:
        raise UserError(f"the training data {a.train_subset!r} in {a.data_dir} is empty: nothing to train on")
    # the first valid split decides (major_metric, best, early stopping); the others are logged beside
    valid_sets = [(name, open_split(a.data_dir, name)) for name in subsets(a.valid_subset)]
    for name, data in valid_sets:
        if len(data) == 0:
            raise UserError(f"the valid_subset {name!r} in {a.data_dir} is empty: "
                            "leave it out of valid_subset or prepare it again")
    per_epoch = updates_per_epoch(sizes, update_size, a.lazy_load)
    # with shards still to come the epoch length is unknown: max_update sets the length (checked)
    limits = [n for n in (a.max_update, not coming and a.max_epoch and a.max_epoch * per_epoch) if n]
    return batches, valid_sets, min(limits)


def build_scheduler(args: Any, total_updates: int, say: Any) -> Any:
    """The lr_scheduler over ``total_updates`` updates (``say`` warns of a warmup longer than the run)."""
    scheduler = component(args, "lr_scheduler")(args, total_updates)
    if getattr(scheduler, "warmup_updates", 0) > total_updates:
        say(f"warning: warmup_steps ({scheduler.warmup_updates}) exceeds the run's "
            f"{total_updates} updates: the learning rate never reaches learning_rate")
    return scheduler


def build_policies(args: Any) -> tuple[EvalSchedule, EarlyStopping, SavePolicy, LossLimit]:
    """When to evaluate, when to stop (early stopping, max_loss) and what to keep, from the options."""
    a = args
    return (EvalSchedule(a.eval_interval, a.eval_interval_warmup, a.eval_interval_warmup_multiplier,
                         per_epoch=a.eval_per_epoch),
            EarlyStopping(a.tolerance, a.ascending_metric, min_steps=a.min_steps),
            SavePolicy(a.save, a.save_best_only, a.save_last_only, a.save_above_score, a.ascending_metric,
                       keep_last=a.keep_last_checkpoints, keep_best=a.keep_best_checkpoints),
            LossLimit(a.max_loss))


def open_tensorboard(args: Any, context: Context, save_dir: str, purge_step: int | None) -> Any:
    """The TensorBoard mirror of the logs (``tensorboard``, main process only), else None."""
    if not (args.tensorboard and context.is_main):
        return None

    return TensorBoardMirror(save_dir, purge_step=purge_step)


def wrap_model(module: torch.nn.Module, context: Context, bmuf: Any) -> torch.nn.Module:
    """The model the update runs: in DistributedDataParallel with several processes (not BMUF, not FSDP:
    a sharded model syncs its gradients itself)."""
    if context.distributed and bmuf is None and not is_sharded(module):
        return torch.nn.parallel.DistributedDataParallel(
            module, device_ids=[context.device.index] if context.device.type == "cuda" else None)
    return module
