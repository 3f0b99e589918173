"""``x-script aggregate_results ROOT... [-KEYWORD ...] [--full] > stats.tsv``: one row per run.

Every x-train run directory below the roots (several roots may be given); ``-KEYWORD`` keeps the runs
whose path contains every such keyword. A row holds the run, its major metric, the best score and its
update, the last update, and the status (done / stopped early / pruned / paused / in progress). With several
valid splits (valid_subset: [dev, test]) a column per other split gives its value of the metric at the best update
(e.g. ``test.accuracy``: the test score of the checkpoint best on dev). ``--full`` adds
the training speed and every hyperparameter that differs between the runs, and sorts by score (best
first, in the metric's direction). Tab-separated on stdout.

``--folds`` gives one row per cross-validation loop instead (docs/config.md, "Cross-validation loops"):
runs whose options are the same except the fold's own (save_dir, train_subset, valid_subset and the
options that are not hyperparameters) form one group, and its row holds the folds' count, the mean and
standard deviation (n - 1) of their best scores, the lowest and the highest, the mean +- std of every other
split's column, and, as with --full, the hyperparameters that differ between the groups.
"""

from __future__ import annotations

import statistics
import sys
from typing import Any

from xdpx import io
from xdpx.command import script
from xdpx.config.errors import ConfigError

# Options that differ between runs without being hyperparameters.
NOT_HYPERPARAMETERS = {"save_dir", "overwrite", "auto_suffix", "resume", "train_steps", "log_file", "fingerprint",
                       "viz", "viz_min_interval", "tensorboard", "inspect_gradient"}
# What the folds of one cross-validation loop differ in (docs/config.md): not what tells loops apart.
FOLD_OPTIONS = {"train_subset", "valid_subset", "data_size"}
USAGE = "usage: x-script aggregate_results ROOT... [-KEYWORD ...] [--full | --folds]"


def parse_argv(argv: list[str]) -> tuple[list[str], list[str], bool]:
    full = "--full" in argv
    rest = [a for a in argv if a not in ("--full", "--folds")]
    keywords = [a[1:] for a in rest if a.startswith("-") and len(a) > 1]
    roots = [a for a in rest if not (a.startswith("-") and len(a) > 1)]
    if not roots or (full and "--folds" in argv):
        raise ConfigError(USAGE)
    return roots, keywords, full


def status(run: Any) -> str:
    path = io.join(run.save_dir, run.args.get("log_file") or "log.txt")
    last = ""
    if io.exists(path):
        with io.open(path) as f:
            lines = f.read().splitlines()
        last = lines[-1] if lines else ""
    if "| done: " in last:
        return "done"
    if "| stopped: " in last:
        return "stopped early"
    if "| pruned: " in last:
        return "pruned"  # an x-tune trial its pruner stopped
    if "| paused: " in last or "paused at update" in last:
        return "paused"
    return "in progress"


def speed(run: Any) -> float | None:
    values = [r["samples_per_s"] for r in run.train if isinstance(r.get("samples_per_s"), (int, float))]
    return statistics.median(values) if values else None


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def aggregate(roots: list[str], keywords: list[str], full: bool) -> list[list[str]]:
    """The table (header first)."""
    # lazy: the run reader (xdpx.viz) waits for a run; x-script --help imports every tool
    from xdpx.viz.runs import find_runs, read_run

    paths = [p for root in roots for p in find_runs(root) if all(k in p for k in keywords)]
    runs = [read_run(p, p) for p in paths]
    header = ["run", "metric", "best", "best_step", "last_step", "status"]
    others = sorted({f"{split}.{run.major_metric or 'loss'}" for run in runs for split in run.valid_splits[1:]})
    header += others
    rows: list[tuple[Any, list[str]]] = []
    differing: list[str] = []
    if full:
        keys = sorted({k for run in runs for k in run.args} - NOT_HYPERPARAMETERS)
        differing = [k for k in keys if len({repr(run.args.get(k)) for run in runs}) > 1]
        header += ["samples_per_s", *differing]
    for run in runs:
        metric = run.major_metric or "loss"
        best = run.best(metric)
        last_step = max((int(r["step"]) for r in run.train + run.valid if r.get("step") is not None), default=0)
        row = [run.save_dir, metric, _cell(best[1] if best else None), _cell(best[0] if best else None),
               str(last_step), status(run)]
        at_best = next((r for r in run.valid if best and r.get("step") == best[0]), {})
        row += [_cell(at_best.get(column)) for column in others]
        if full:
            row += [_cell(speed(run)), *(_cell(run.args.get(k)) for k in differing)]
        rows.append((run, row))
    if full:
        def key(item: tuple[Any, list[str]]) -> tuple[int, float]:
            run, row = item
            if not row[2]:
                return (1, 0.0)
            value = float(row[2])
            return (0, value if run.lower_is_better(row[1]) else -value)

        rows.sort(key=key)
    return [header] + [row for _, row in rows]


def mean_std(values: list[float]) -> tuple[float, float]:
    """The mean and the sample standard deviation (n - 1; 0 for one value)."""
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def aggregate_folds(roots: list[str], keywords: list[str]) -> list[list[str]]:
    """One row per cross-validation loop (header first): folds, mean and std of the best scores."""
    # lazy: the run reader (xdpx.viz) waits for a run; x-script --help imports every tool
    from xdpx.viz.runs import find_runs, read_run

    paths = [p for root in roots for p in find_runs(root) if all(k in p for k in keywords)]
    runs = [read_run(p, p) for p in paths]
    ignored = NOT_HYPERPARAMETERS | FOLD_OPTIONS
    groups: dict[str, list[Any]] = {}
    for run in runs:  # runs in the order found; a group keeps the order of its first run
        key = repr(sorted((k, repr(v)) for k, v in run.args.items() if k not in ignored))
        groups.setdefault(key, []).append(run)
    keys = sorted({k for run in runs for k in run.args} - ignored)
    differing = [k for k in keys if len({repr(group[0].args.get(k)) for group in groups.values()}) > 1]
    others = sorted({f"{split}.{run.major_metric or 'loss'}" for run in runs for split in run.valid_splits[1:]})
    header = ["runs", "metric", "folds", "best_mean", "best_std", "best_min", "best_max"]
    header += [f"{column}_{kind}" for column in others for kind in ("mean", "std")] + differing
    table = [header]
    for group in groups.values():
        metric = group[0].major_metric or "loss"
        found = [(run, run.best(metric)) for run in group]
        scores = [float(best[1]) for _, best in found if best]
        names = ",".join(io.basename(run.save_dir.rstrip("/")) for run in group)
        row = [f"{io.dirname(group[0].save_dir.rstrip('/'))}/{{{names}}}", metric, str(len(scores))]
        if scores:
            mean, std = mean_std(scores)
            row += [_cell(mean), _cell(std), _cell(min(scores)), _cell(max(scores))]
        else:
            row += ["", "", "", ""]
        for column in others:
            values = []
            for run, best in found:
                at_best = next((r for r in run.valid if best and r.get("step") == best[0]), {})
                if isinstance(at_best.get(column), (int, float)):
                    values.append(float(at_best[column]))
            row += [_cell(v) for v in mean_std(values)] if values else ["", ""]
        row += [_cell(group[0].args.get(k)) for k in differing]
        table.append(row)
    return table


@script("aggregate_results")
def main(argv: list[str]) -> int:
    """One TSV row per run below ROOT(s): best score and step, status; or one per cross-validation loop.

    --full adds speed and hyperparameters; --folds gives one row per cross-validation loop, mean +- std of
    its folds' best scores."""
    roots, keywords, full = parse_argv(argv)
    table = aggregate_folds(roots, keywords) if "--folds" in argv else aggregate(roots, keywords, full)
    if len(table) == 1:
        print(f"aggregate_results: no run directory below {', '.join(roots)}"
              + (f" with {', '.join(keywords)} in its path" if keywords else ""), file=sys.stderr)
        return 1
    for row in table:
        print("\t".join(row))
    return 0
