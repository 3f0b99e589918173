"""The options of x-train, declared once (docs/options/x-train is generated from this list).

Names and defaults follow the seed documentation's table; a few additions users of such a loop
expect (valid_batch_size, cpu) are marked as such in their doc.
"""

from __future__ import annotations

from typing import Any

from xdpx import io
from xdpx.config.options import Option, Rule, exclusive
from xdpx.config.ranges import above, any_number, at_least, exactly, in_range
from xdpx.losses import losses
from xdpx.models.choice import MODEL_OPTIONS
from xdpx.optim import lr_schedulers, optimizers
from xdpx.optim.bmuf import BMUF_OPTIONS
from xdpx.tasks import tasks
from xdpx.train.callbacks import callbacks
from xdpx.train.launch import LAUNCH_OPTIONS
from xdpx.train.legacy_options import LEGACY_FP16_OPTIONS
from xdpx.utils.optional import installed, missing_message

FP16_OPTIONS = [
    Option("fp16_init_scale", int, default=128, validate=at_least(1),
           doc="initial loss scale of fp16 dynamic loss scaling"),
    Option("fp16_scale_tolerance", float, default=0.0, validate=in_range(0, 1),
           doc="fraction of updates that may overflow (since the last rescale) before the loss scale is "
               "decreased; 0 decreases it at every overflow"),
    Option("threshold_loss_scale", float, default=None, validate=above(0),
           doc="the loss scale never goes below this value when decreased (null: no floor)"),
    Option("min_loss_scale", float, default=0.1, validate=at_least(0),
           doc="training stops, naming the parameters that overflowed, when the loss scale falls below this"),
]


FSDP_OPTIONS = [
    Option("fsdp_sharding", str, default="full", choices=["full", "grad_op", "hybrid"],
           doc="what FSDP shards: full (parameters, gradients and optimizer state: the least memory; each "
               "layer's weights are gathered for its forward and again for its backward), grad_op (gradients "
               "and optimizer state; the weights stay gathered from the forward to the backward: less "
               "communication, more memory), hybrid (full sharding within each machine, replicas across "
               "machines: the gathers stay on the machine's own links)"),
]


TRAIN_OPTIONS: list[Any] = [
    # paths
    Option("data_dir", str, doc="the output folder of x-prepro (holds meta.hjson and the binary splits)"),
    Option("save_dir", str, doc="the run directory: args, logs, checkpoints and the resumable state"),
    Option("overwrite", bool, default=False,
           doc="replace the run in save_dir: clears only a run directory of x-train (or an empty folder), "
               "and only the files x-train wrote; any other folder is refused before any work "
               "(docs/reliability.md)"),
    Option("auto_suffix", bool, default=False,
           doc="use save_dir.1, save_dir.2 ... when save_dir exists. Exclusive with overwrite"),
    Option("resume", bool, default=False,
           doc="continue the run in save_dir from its last full state (weights, optimizer, lr schedule, "
               "RNGs, data position, counters); starts from scratch when no state was saved yet"),
    Option("train_subset", str | list[str], default="train",
           doc="training split name(s); Unix filename patterns (train*) match several shards"),
    Option("exclude_valid_from_train", bool, default=False,
           doc="leave the valid_subset split(s) out of the training splits that train_subset matches (e.g. "
               "train_subset: '*' over train, dev and test with valid_subset: dev trains on train and test); "
               "log.txt says which splits and how many samples were left out. Off, a train_subset that includes "
               "a valid split trains on it, with a warning on stderr and in log.txt"),
    Option("lazy_load", bool, default=False,
           doc="with several training shards: open one shard at a time, shuffle inside it, and shuffle "
               "the shard order from the second epoch on (shards must be pre-shuffled). Training may start "
               "while x-prepro still writes later shards named in train_subset: it waits for each one",
           children={True: [Option("lazy_load_wait", float, default=600.0, validate=above(0),
                                   doc="seconds to wait for a shard of train_subset that x-prepro has not "
                                       "written yet before stopping with an error (the run stays resumable)")]}),
    # training
    Option("seed", int | None, default=1, validate=at_least(0),
           doc="seed of init, data order and per-step randomness; null disables"),
    Option("max_epoch", int, default=None, validate=at_least(1),
           doc="number of epochs; with max_update too, the smaller number of updates wins"),
    Option("max_update", int, default=None, validate=at_least(1),
           doc="number of updates (optimizer steps); sets the length of the lr schedule"),
    Option("train_steps", int, default=None, validate=at_least(1),
           doc="pause once this many updates are done (counted from the start of the run, not of this "
               "invocation); the lr schedule still follows max_update/max_epoch; continue with resume: true"),
    Option("batch_size", int, validate=at_least(1),
           doc="samples per forward pass; the update uses batch_size x update_freq samples"),
    Option("valid_batch_size", int, default=lambda a: a.batch_size, default_doc="batch_size",
           validate=at_least(1), doc="samples per batch at evaluation (addition)"),
    Option("update_freq", int, default=1, validate=at_least(1),
           doc="gradient accumulation: forward passes per update"),
    Option("auto_ga", bool, default=False,
           doc="on out-of-memory, halve batch_size and double update_freq (same effective batch), redo "
               "the update from the same data; the new split is kept on resume"),
    Option("learning_rate", float, validate=above(0), doc="peak learning rate"),
    Option("clip_norm", float | None, default=5.0, validate=at_least(0),
           doc="gradient norm clipping; 0 or null disables clipping"),
    Option("cpu", bool, default=False, doc="train on the CPU even when a GPU is available (addition)"),
    Option("max_loss", float, default=None, validate=above(0),
           doc="stop training, with a line in log.txt naming the update and the loss, once an update's mean "
               "training loss exceeds this (a diverging run); the run ends as stopped after a last "
               "evaluation. null: never (the original's default was 200)"),
    Option("ema_decay", float, default=None, validate=in_range(0, 1),
           doc="keep an exponential moving average of the weights (average = ema_decay x average + "
               "(1 - ema_decay) x weights after each update; e.g. 0.999): evaluations, valid.log.tsv and the "
               "checkpoints use the average, so x-eval, x-pred and the exports do too; state.pt keeps both. "
               "null or 1: off"),
    *LAUNCH_OPTIONS,
    Option("use_bmuf", bool, default=False,
           doc="with several processes, train with BMUF (blockwise model-update filtering) instead of syncing "
               "gradients at every update: each process trains its own copy for global_sync_iter updates, then "
               "the copies are merged with block momentum (xdpx/optim/bmuf.py); no effect with one process",
           children={True: BMUF_OPTIONS}),
    Option("fsdp", bool, default=False,
           doc="with several processes, shard the model, its gradients and its optimizer state over them "
               "(torch's fully sharded data parallel, FSDP2) instead of a full copy on each (DDP): for models "
               "larger than one device's memory. Same updates as DDP; the saved state and checkpoints are "
               "plain (full) state_dicts, so a run resumes on another number of processes and exports as any "
               "other (docs/train.md, FSDP). No effect with one process",
           children={True: FSDP_OPTIONS}),
    Option("fp16", bool, default=False, doc="fp16 mixed precision with dynamic loss scaling (CUDA)",
           children={True: FP16_OPTIONS}),
    Option("bf16", bool, default=False, doc="bf16 autocast (CUDA, or CPU); no loss scaling needed"),
    *LEGACY_FP16_OPTIONS,
    Option("compile", bool, default=False,
           doc="compile the model with torch.compile (inductor) for training and evaluation (addition); "
               "the first batches and new batch shapes take longer while kernels are built. Needs a C++ "
               "compiler: without one a warning is logged and the model runs eagerly. Checkpoints and "
               "resume are the same either way"),
    # logging and evaluation
    Option("log_interval", int, default=10, validate=at_least(1),
           doc="updates between rows of train.log.tsv"),
    Option("log_file", str | None, default="log.txt", doc='log filename under "save_dir" (null: no log file)'),
    Option("eval_interval", int, default=-1,
           validate=exactly(-1) | at_least(1),
           doc="updates between evaluations; -1 means just eval at the end of training"),
    Option("eval_per_epoch", bool, default=False,
           doc="evaluate (and maybe save) at the end of every epoch instead of every eval_interval updates "
               "(addition; set eval_interval to -1)"),
    Option("max_eval_steps", int, default=None, validate=at_least(1),
           doc="evaluate on at most this many batches of each valid split (the shortest samples: batches are "
               "cut by length), as x-eval's max_eval_steps; null: the whole split"),
    Option("eval_interval_warmup", int, default=0, validate=at_least(0),
           doc="before this update, evaluate (and maybe save) eval_interval_warmup_multiplier times less often"),
    Option("eval_interval_warmup_multiplier", int, default=6, validate=at_least(1),
           aliases=("eval_interval_warmup_mutiplier",),
           doc="see eval_interval_warmup (the original XDPX's spelling eval_interval_warmup_mutiplier "
               "is accepted)"),
    Option("valid_subset", str | list[str] | None, default="dev",
           doc="the split(s) to evaluate on (null: no evaluation). With a list, major_metric, the best "
               "checkpoint and early stopping follow the first; valid.log.tsv has the first split's metrics "
               "as they are and each other split's as <split>.<metric> columns (e.g. test.accuracy)"),
    Option("eval_corpus", str, default=None, path="input",
           doc="bi-encoders: a BEIR-format folder (corpus.jsonl, queries.jsonl, qrels/test.tsv; or name "
               "<folder>/qrels/<split>.tsv) whose NDCG, MAP, MRR, recall and precision at each k of recall_at "
               "every evaluation logs as corpus.<metric>_at_<k> columns (major_metric: corpus.ndcg_at_10 may "
               "use them); the same values x-eval reports with the folder as valid_subset. null: none"),
    # plots and debugging aids (docs/viz.md)
    Option("viz", bool, default=True,
           doc="draw the x-viz figures of the run into save_dir/plots during training (main process): after "
               "an evaluation when viz_min_interval seconds passed since the last drawing, and at the end; a "
               "plotting failure is logged and never stops training",
           children={True: [Option("viz_min_interval", float, default=60.0, validate=at_least(0),
                                   doc="seconds between two drawings after evaluations (drawing takes a few "
                                       "seconds); the end of training is drawn when the run trained at least "
                                       "this long (plot shorter runs with x-viz)")]}),
    Option("inspect_gradient", bool, default=False,
           doc="at every evaluation, draw mean and max |grad| of each parameter (before clipping) on a "
               "log scale into save_dir/plots/gradients/<step>.png"),
    Option("tensorboard", bool, default=False,
           doc="also write TensorBoard event files (save_dir/tensorboard) mirroring train.log.tsv and "
               "valid.log.tsv (addition; needs the tensorboard package: pip install 'xdpx[tensorboard]')"),
    Option("major_metric", str, doc="metric for early stopping, best checkpoint and display (or 'loss')"),
    Option("ascending_metric", bool, default=True, doc="whether the major metric is the higher the better"),
    Option("tolerance", int, default=None, validate=at_least(1),
           doc="early stopping: stop after this many evaluations without a new best; null: never"),
    Option("min_steps", int, default=0, validate=at_least(0),
           doc="early stopping never stops before this many updates, whatever tolerance says"),
    # saving
    Option("save", bool, default=True, doc="save a weights checkpoint (checkpoint-<step>.pt) at each evaluation; the full state for resume "
               "(state.pt) is written at each evaluation either way"),
    Option("save_best_only", bool, default=False, doc="keep only the best checkpoint"),
    Option("save_above_score", float, default=None,
           validate=any_number(), doc="only save when major_metric is better than this score"),
    Option("save_full_checkpoint", bool, default=False,
           doc="also keep the full training state of every saved checkpoint (state-<step>.pt); the last "
               "full state (state.pt) is always kept for resume"),
    Option("save_last_only", bool, default=False,
           doc="keep only the last checkpoint; with save_best_only, keep the best and the last"),
    Option("keep_last_checkpoints", int, default=None, validate=at_least(1),
           doc="keep only the N latest checkpoints, and the best one besides (addition, as save_total_limit "
               "of other trainers); the deleted checkpoints' state-<step>.pt go with them"),
    Option("keep_best_checkpoints", int, default=None, validate=at_least(1),
           doc="keep the K checkpoints with the best major_metric, besides the latest one (or the "
               "keep_last_checkpoints latest); the others and their state-<step>.pt are deleted"),
    Option("pretrained_model", str, default=None,
           doc="weights to start from: a checkpoint path, or <best>/<last> of an earlier run "
               "(e.g. ${save_dir}/<best>)"),
    exclusive("overwrite", "auto_suffix"),
    Rule(lambda a: not a.tensorboard or installed("tensorboard"), missing_message("tensorboard", "tensorboard: true"),
         keys=("tensorboard",)),
    Rule(lambda a: not isinstance(a.save_dir, str) or io.output_path_problem(a.save_dir) is None,
         lambda a: f"key 'save_dir': {io.output_path_problem(a.save_dir)}", keys=("save_dir",)),
    Rule(lambda a: not (a.tensorboard and "://" in str(a.save_dir)),
         "tensorboard: true writes event files to a local save_dir only", keys=("tensorboard", "save_dir")),
    exclusive("fp16", "bf16"),
    Rule(lambda a: not (a.fp16 and a.use_bmuf), "use_bmuf: fp16 loss scaling would skip updates on some processes "
         "only; use bf16 with BMUF", keys=("fp16", "use_bmuf")),
    exclusive("keep_last_checkpoints", "save_best_only"),
    exclusive("keep_last_checkpoints", "save_last_only"),
    exclusive("keep_best_checkpoints", "save_best_only"),
    Rule(lambda a: not (a.ema_decay is not None and a.ema_decay < 1 and a.use_bmuf),
         "ema_decay with use_bmuf: each process would average its own copy of the model, and the evaluation "
         "gathers the processes' outputs; use one of them", keys=("ema_decay", "use_bmuf")),
    exclusive("keep_best_checkpoints", "save_last_only"),
    Rule(lambda a: not (a.fsdp and a.use_bmuf), "fsdp and use_bmuf exclude each other: BMUF trains a full copy "
         "of the model on each process, FSDP shards one model over them", keys=("fsdp", "use_bmuf")),
    Rule(lambda a: not (a.fsdp and a.auto_ga), "auto_ga with fsdp: an out-of-memory on one process would leave "
         "the others waiting in a weight gather; choose batch_size / update_freq yourself",
         keys=("fsdp", "auto_ga")),
    Rule(lambda a: not (a.fsdp and a.ema_decay is not None and a.ema_decay < 1),
         "ema_decay with fsdp: the average would be a full copy of the model on each process; use one of them",
         keys=("fsdp", "ema_decay")),
    Rule(lambda a: not (a.fsdp and a.compile), "compile with fsdp is not supported yet: use one of them",
         keys=("fsdp", "compile")),
    Rule(lambda a: not (a.keep_best_checkpoints and a.valid_subset is None),
         "keep_best_checkpoints ranks checkpoints by their evaluation: set valid_subset",
         keys=("keep_best_checkpoints", "valid_subset")),
    Rule(lambda a: a.max_update is None or a.min_steps <= a.max_update,
         "min_steps is larger than max_update: early stopping could never stop", keys=("min_steps", "max_update")),
    Rule(lambda a: not (a.eval_per_epoch and a.eval_interval != -1),
         "eval_per_epoch evaluates at each epoch end: set eval_interval: -1 (or eval_per_epoch: false)",
         keys=("eval_per_epoch", "eval_interval")),
    Rule(lambda a: a.max_epoch is not None or a.max_update is not None,
         "set max_epoch or max_update (or both: the smaller wins)", keys=("max_epoch", "max_update")),
    Rule(lambda a: not (a.save_above_score is not None and a.valid_subset is None),
         "save_above_score needs evaluations: set valid_subset", keys=("save_above_score", "valid_subset")),
]


def registry_options() -> list[Any]:
    """task / model (or encoder + head) / loss / optimizer / lr_scheduler / callbacks: each value switches on its component's
    options."""
    return [
        Option("task", str, default="default", registry=tasks, doc="See xdpx/tasks/"),
        *MODEL_OPTIONS,
        Option("loss", str, registry=losses, doc="See xdpx/losses/"),
        Option("optimizer", str, default="adam", registry=optimizers, doc="See xdpx/optim/"),
        Option("lr_scheduler", str, default="constant", registry=lr_schedulers, doc="See xdpx/optim/"),
        Option("callbacks", list[str], default=[], registry=callbacks,
               doc="callbacks called at train start, after each update, evaluation and save, and at train end "
                   "(docs/train.md, Callbacks): built-in mlflow, or your own registered from user_dir"),
    ]
