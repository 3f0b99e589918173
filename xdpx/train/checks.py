"""What x-train checks before any work, with or without ``--dry`` (no torch needed).

Each problem is one line naming the key and the fix; they are reported together as a ConfigError.
"""

from __future__ import annotations

import os
from typing import Any

from xdpx import io
from xdpx.io import writer_lock
from xdpx.models.checkpoints import CheckpointError, resolve_checkpoint
from xdpx.models.hf_hub import local_pretrained
from xdpx.models.int8 import training_refusal
from xdpx.runtime.run_files import STATE_FILE, available_splits, match_subsets, subsets
from xdpx.tasks.teacher_checks import teacher_problems
from xdpx.train.corpus_metrics import corpus_problems
from xdpx.train.run_dir import dir_in_use, held_refusal, run_files_split, save_dir_problems, suffixed_save_dir
from xdpx.train.shards import is_pattern


def without_valid(args: Any, train_splits: list[str]) -> tuple[list[str], list[str]]:
    """(training splits, the valid splits left out of them): ``exclude_valid_from_train`` drops the
    valid_subset splits that train_subset's patterns matched too; without it nothing is left out."""
    if not args.get("exclude_valid_from_train"):
        return train_splits, []
    valid = set(subsets(args.valid_subset))
    return [s for s in train_splits if s not in valid], [s for s in train_splits if s in valid]


def valid_in_training(args: Any, train_splits: list[str] | None = None) -> str | None:
    """The warning when the training splits (default: those train_subset matches in data_dir) hold a
    valid_subset split and exclude_valid_from_train is off: the run is evaluated on data it trains on, e.g.
    each fold of a cross-validation loop whose train_subset is a pattern (fold*) that matches its valid
    split too. Not refused: training on dev is a choice one may make."""
    if train_splits is None:
        train_splits = match_subsets(args.train_subset, available_splits(args.data_dir))[0]
    both = [s for s in subsets(args.valid_subset) if s in train_splits]
    if not both or args.get("exclude_valid_from_train"):
        return None
    return (f"warning: {args.source('train_subset')}: key 'train_subset': {args.train_subset!r} includes the "
            f"valid split{'s' if len(both) > 1 else ''} {', '.join(both)} (valid_subset): this run trains on the data "
            "it is evaluated on; set exclude_valid_from_train: true to leave it out of training (cross-validation)")


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def preflight(args: Any) -> tuple[list[str], list[str]]:
    """(problems, notes) of a resolved x-train config; ``args`` is not changed."""
    problems: list[str] = []
    notes: list[str] = []
    data_dir, save_dir = args.data_dir, args.save_dir
    holder = None if args.auto_suffix else writer_lock.current_holder(save_dir)
    if holder is not None:  # first, and alone: the folder is changing under the other run
        return [held_refusal(args, save_dir, holder)], []

    if not io.exists(io.join(data_dir, "meta.hjson")):
        problems.append(f"{args.source('data_dir')}: key 'data_dir': {data_dir!r} holds no meta.hjson: "
                        "run x-prepro for it first (and inherit it with __parent__: ${data_dir}/meta)")
    splits = available_splits(data_dir)
    train_splits, unmatched = match_subsets(args.train_subset, splits)
    train_splits, excluded = without_valid(args, train_splits)
    if excluded and not train_splits:
        problems.append(f"{args.source('train_subset')}: key 'train_subset': every split it matches ({excluded}) "
                        "is a valid_subset split, which exclude_valid_from_train leaves out: nothing to train on")
    if args.lazy_load:  # plain shard names x-prepro has not written yet: training will wait for them

        coming = [name for name in unmatched if not is_pattern(name)]
        unmatched = [name for name in unmatched if is_pattern(name)]
        if coming:
            notes.append(f"lazy_load: shards {coming} are not written yet: training waits for each (lazy_load_wait)")
            if args.max_update is None:
                problems.append(f"{args.source('train_subset')}: key 'train_subset': shards {coming} are not "
                                f"written yet in {data_dir}, so the epoch length is unknown: set max_update "
                                "(or wait until x-prepro has written them)")
    for pattern in unmatched:
        problems.append(f"{args.source('train_subset')}: key 'train_subset': {pattern!r} matches no split "
                        f"in {data_dir} (available: {', '.join(splits) or 'none'})")
    problems += corpus_problems(args)  # eval_corpus: a bad BEIR file is one line, before anything is written
    valid = subsets(args.valid_subset)
    for name in valid:
        if name not in splits:
            problems.append(f"{args.source('valid_subset')}: key 'valid_subset': no split {name!r} "
                            f"in {data_dir} (available: {', '.join(splits) or 'none'}); "
                            "set valid_subset: null to train without evaluation")
    if len(set(valid)) != len(valid):
        problems.append(f"{args.source('valid_subset')}: key 'valid_subset': {valid} names a split twice")

    sizes = args.get("data_size") or {}
    if train_splits and all(s in sizes for s in train_splits):
        train_size = sum(sizes[s] for s in train_splits)
        effective = args.batch_size * args.update_freq * (world_size() if "WORLD_SIZE" in os.environ
                                                          else args.get("distributed_world_size") or 1)
        if train_size == 0:
            problems.append(f"{args.source('train_subset')}: the training split(s) {train_splits} are empty")
        elif effective > train_size and not args.lazy_load:
            problems.append(f"{args.source('batch_size')}: key 'batch_size': batch_size x update_freq x "
                            f"processes = {effective} is larger than the training set ({train_size} samples); "
                            "lower batch_size or update_freq")
        notes.append(f"training on {train_splits}: {train_size} samples, effective batch {effective}")

    problems += [f"{args.source(key)}: key {key!r}: {p}" for key, p in save_dir_problems(args)]
    if args.overwrite and dir_in_use(save_dir) and not problems:
        removed, kept = run_files_split(save_dir, args.log_file)
        notes.append(f"overwrite: the earlier run in {save_dir} is cleared before training ({len(removed)} "
                     f"entries written by x-train" + (f"; kept, not ours: {', '.join(kept)}" if kept else "") + ")")
    if args.resume and (args.overwrite or args.auto_suffix):
        problems.append(f"{args.source('resume')}: resume continues save_dir: set overwrite and auto_suffix "
                        "to false")
    target = suffixed_save_dir(save_dir) if args.auto_suffix else save_dir
    if not io.is_writable(target):
        problems.append(f"{args.source('save_dir')}: key 'save_dir': cannot write to {target!r} "
                        "(check permissions or credentials)")
    if args.auto_suffix and target != save_dir:
        notes.append(f"save_dir exists: this run will write to {target}")
    if args.resume:
        state = io.join(save_dir, STATE_FILE)
        notes.append(f"resume from {state}" if io.exists(state) else
                     f"resume: {save_dir} holds no saved state yet; the run starts from the beginning")

    warmup = args.get("warmup_steps")
    if isinstance(warmup, int) and args.max_update and warmup > args.max_update:
        notes.append(f"warning: warmup_steps ({warmup}) exceeds max_update ({args.max_update}): the learning "
                     "rate never reaches learning_rate")
    for key in ("save_dir", "pretrained_model"):  # an int8 model of x-script quantize is for inference only
        refusal = training_refusal(args.get(key), key)
        if refusal:
            problems.append(f"{args.source(key)}: {refusal}")
    pretrained = args.get("pretrained_model")
    if pretrained and not any("x-script quantize" in p for p in problems):
        try:  # a Hugging Face Hub name resolves from the local cache only (xdpx/models/hf_hub.py)
            notes.append(f"pretrained_model: {resolve_checkpoint(local_pretrained(pretrained))}")
        except CheckpointError as e:
            problems.append(f"{args.source('pretrained_model')}: key 'pretrained_model': {e}")
    problems += teacher_problems(args)  # an online distillation teacher: its files read, nothing loaded
    return problems, notes
