"""The keys of tune.hjson, declared once (docs/options/x-tune is generated from this list).

The original XDPX's keys keep their names and meaning; the additions (pruner, storage, study_name, seed,
heartbeat_interval, max_retries) say so in their doc. How each maps onto Optuna: docs/tune.md.
"""

from __future__ import annotations

from typing import Any

from xdpx import io
from xdpx.config.options import Option, Rule
from xdpx.config.ranges import any_number, at_least, in_range
from xdpx.tune.study import storage_problem

TUNERS = ("tpe", "random")
PRUNERS = ("hyperband", "successive_halving", "percentile", "none")


def _keeps_at_most_half(args: Any) -> bool:
    return args.pruner not in ("hyperband", "successive_halving") or args.cull_keep_ratio <= 0.5


TUNE_OPTIONS: list[Any] = [
    Option("space_config", str,
           doc="the search space file (space.hjson; relative to this file, extension optional): one entry "
               "per x-train option, {type: float|int|categorical, values: [...], log, step}"),
    Option("base_config", str,
           doc="the x-train config every trial starts from (relative to this file, extension optional); "
               "each trial overrides the sampled options and its save_dir"),
    Option("save_dir", str,
           doc="the study folder: one x-train run per trial (trial_<n>/), their configs (configs/), "
               "results.tsv, overview.png, best_config.hjson and, by default, the Optuna storage (study.db)"),
    Option("tuner", str, default="tpe", choices=TUNERS,
           doc="how trials are sampled: tpe (Optuna's TPESampler: random for the first trials, then "
               "guided by the results so far) or random (RandomSampler)"),
    Option("pruner", str, default=lambda a: "percentile" if a.cull_keep_ratio > 0.5 else "hyperband",
           default_doc="hyperband (percentile when cull_keep_ratio > 0.5)", choices=PRUNERS,
           doc="(addition) how trials are stopped early: hyperband (Optuna's HyperbandPruner), "
               "successive_halving (SuccessiveHalvingPruner), percentile (PercentilePruner: the original "
               "XDPX's linear culling, keeping cull_keep_ratio of the trials at every assessment) or none"),
    Option("assess_interval", int, validate=at_least(1),
           doc="updates between two assessments of a trial (its evaluations happen every assess_interval "
               "updates of the base config's batch size: the trial's eval_interval)"),
    Option("assess_start_step", int, default=lambda a: a.assess_interval, default_doc="assess_interval",
           validate=at_least(1),
           doc="the first assessment (update): no trial is stopped before it; hyperband / "
               "successive_halving: the smallest budget (min_resource), the next rungs at "
               "assess_start_step x (1 / cull_keep_ratio)^k"),
    Option("cull_keep_ratio", float, default=0.5, validate=in_range(0, 1, low_open=True, high_open=True),
           doc="the share of trials kept at each assessment: hyperband / successive_halving use the "
               "reduction factor round(1 / cull_keep_ratio) (so at most 0.5); percentile keeps this share"),
    Option("parallel_runs", int, default=None, validate=at_least(1),
           doc="trials trained at once by this x-tune process, each a separate x-train process; default: one "
               "per visible GPU (CUDA_VISIBLE_DEVICES), 1 without GPUs"),
    Option("max_trials", int, validate=at_least(1),
           doc="trials of the whole study (every worker together); with parallel_runs 16, 32 trials run "
               "about two rounds"),
    Option("min_ref", int, default=1, validate=at_least(0),
           doc="no trial is pruned before this many trials have run to the end (the references the "
               "others are compared with)"),
    Option("eval_deviation", int, default=None, validate=at_least(1),
           doc="samples: an evaluation is compared with the other trials' only when it lies within this "
               "many training samples of an assessment point, and is then reported at that point (matters "
               "when batch_size or update_freq are tuned, and for the epoch's partial batch); null: half an "
               "assess_interval of the base config's samples"),
    Option("save_above_score", float, default=None, validate=any_number(),
           doc="when a trial ends, its checkpoints are removed unless its best major_metric is better than "
               "this score (logs, args.py and plots stay)"),
    Option("storage", str, default=None,
           doc="(addition) the Optuna storage: null: an SQLite file save_dir/study.db (one machine); "
               "postgresql://user@host:port/db (or any SQLAlchemy URL) lets x-tune processes on several "
               "machines work on one study with a shared save_dir"),
    Option("study_name", str, default="x-tune",
           doc="(addition) the study's name in the storage (several studies may share one storage)"),
    Option("seed", int, default=1, validate=at_least(0),
           doc="(addition) seed of the sampler: trial n is sampled with seed + n"),
    Option("heartbeat_interval", int, default=30, validate=at_least(1),
           doc="(addition) seconds between the heartbeats of a running trial; a trial without a heartbeat "
               "for 2 x this long (its x-tune process was killed) is marked failed and retried"),
    Option("max_retries", int, default=1, validate=at_least(0),
           doc="(addition) how many times an interrupted trial (killed x-tune, lost machine) is run again "
               "with the same values; a trial that fails by itself (error, NaN) is not retried"),
    Rule(lambda a: not isinstance(a.save_dir, str) or io.output_path_problem(a.save_dir) is None,
         lambda a: f"key 'save_dir': {io.output_path_problem(a.save_dir)}", keys=("save_dir",)),
    Rule(lambda a: storage_problem(a.storage) is None, lambda a: storage_problem(a.storage) or "",
         keys=("storage",)),
    Rule(_keeps_at_most_half,
         "cull_keep_ratio above 0.5 needs pruner: percentile (hyperband and successive_halving halve at "
         "least: their reduction factor round(1 / cull_keep_ratio) must be >= 2); or set cull_keep_ratio <= 0.5",
         keys=("cull_keep_ratio", "pruner")),
    Rule(lambda a: a.assess_start_step % a.assess_interval == 0,
         "assess_start_step must be a multiple of assess_interval (trials are evaluated every assess_interval "
         "updates, so the first assessment must fall on an evaluation)",
         keys=("assess_start_step", "assess_interval")),
]
