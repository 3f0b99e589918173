"""What a study leaves in save_dir besides its trials: results.tsv, overview.png, best_config.hjson.

Written after every trial (by whichever worker finished it) from the storage and the trials' own
valid.log.tsv, so they are current while the study runs and complete when it ends.
"""

from __future__ import annotations

import math
from typing import Any

from xdpx import io
from xdpx.models.checkpoints import INDEX_FILE, list_checkpoints
from xdpx.tune.locking import storage_lock
from xdpx.tune.plan import TunePlan, trial_dir, write_train_config
from xdpx.tune.runner import ERROR_ATTR
from xdpx.tune.study import OVER_BUDGET, RETRY_HISTORY, storage_url

RESULTS_FILE = "results.tsv"
OVERVIEW_FILE = "overview.png"
BEST_CONFIG_FILE = "best_config.hjson"
STATE_COLORS = {"complete": "#1f77b4", "pruned": "#aaaaaa", "fail": "#d62728", "running": "#ff7f0e"}


def study_trials(study: Any) -> list[Any]:
    return [t for t in study.get_trials(deepcopy=False) if not t.system_attrs.get(OVER_BUDGET)]


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value).replace("\t", " ").replace("\n", " ")


def retries(trials: list[Any]) -> dict[int, int]:
    """{number of an interrupted trial: number of the trial that ran it again}."""
    return {number: t.number for t in trials for number in t.system_attrs.get(RETRY_HISTORY, [])[-1:]}


def results_table(plan: TunePlan, trials: list[Any]) -> list[list[str]]:
    """trial, state, the sampled values, best score and step, last step, updates, save_dir, error (header
    first). ``last_step`` is the last step reported to the pruner (a pruned trial's rung); ``updates`` the
    base-config updates the trial trained to its last evaluation (samples seen / the base config's
    samples per update): a complete trial's final evaluation can lie near a step already reported (1,317
    updates with rung points every 50: reported at 1,300), so only ``updates`` says how far it trained."""
    names = [p.name for p in plan.params]
    retried_as = retries(trials)
    metric = plan.base_args.major_metric
    header = ["trial", "state", *names, f"best_{metric}", "best_step", "last_step", "updates", "save_dir",
              "error"]
    rows = [header]
    for t in trials:
        values = plan.trial_values(t.params)
        last = max(t.intermediate_values, default=None)
        seen = t.user_attrs.get("samples_seen")
        updates = round(seen / plan.update_size) if seen is not None else None
        error = t.user_attrs.get(ERROR_ATTR)
        if t.state.name == "FAIL" and not error:
            error = "interrupted: its x-tune process stopped (no heartbeat)" + (
                f"; run again as trial {retried_as[t.number]}" if t.number in retried_as else "")
        rows.append([str(t.number), t.state.name.lower(), *(_cell(values.get(n)) for n in names),
                     _cell(t.user_attrs.get("best_score")), _cell(t.user_attrs.get("best_step")), _cell(last),
                     _cell(updates),
                     _cell(t.user_attrs.get("save_dir") or trial_dir(plan.args.save_dir, t.number)),
                     _cell(error)])
    return rows


def best_trial(plan: TunePlan, trials: list[Any]) -> Any:
    done = [t for t in trials if t.state.name == "COMPLETE" and t.value is not None and not math.isnan(t.value)]
    if not done:
        return None
    pick = max if plan.direction == "maximize" else min
    return pick(done, key=lambda t: t.value)


def write_outputs(plan: TunePlan, study: Any) -> Any:
    """results.tsv, best_config.hjson and overview.png of the study as it is now; the best trial.

    Every worker rewrites them when one of its trials ends. Each file is replaced atomically (io.open),
    but a worker that read the storage before another worker's trial ended could replace the newer
    files with its older picture; so the storage is read and the files written under the study's
    outputs lock (locking.py): one writer at a time, each writing what the storage held when it got the
    lock, so the files never go back in time and the last ones written show every trial."""
    save_dir = plan.args.save_dir
    with storage_lock(storage_url(plan.args.storage, save_dir), f"study:{study.study_name}:outputs"):
        trials = study_trials(study)
        with io.open(io.join(save_dir, RESULTS_FILE), "w") as f:
            f.write("\n".join("\t".join(row) for row in results_table(plan, trials)) + "\n")
        best = best_trial(plan, trials)
        if best is not None:
            folder = io.join(save_dir, "best_retrain")
            args = plan.trial_args(plan.trial_values(best.params), folder)
            write_train_config(args, io.join(save_dir, BEST_CONFIG_FILE),
                               f"the best trial of study {study.study_name!r} so far: trial {best.number}, "
                               f"{plan.base_args.major_metric} {best.value:.6g}; retrained into {folder}")
        plot_overview(plan, trials, best, io.join(save_dir, OVERVIEW_FILE))
    return best


def plot_overview(plan: TunePlan, trials: list[Any], best: Any, path: str) -> None:
    """Every trial's dev metric against samples seen; pruned trials end early (x), the best is marked."""
    from matplotlib.figure import Figure  # lazy: loads matplotlib

    from xdpx.viz import read_tsv, save_figure  # lazy: loads numpy

    metric = plan.base_args.major_metric
    figure = Figure(figsize=(10, 6), dpi=100)
    ax = figure.add_subplot()
    drawn = set()
    for t in trials:
        rows = [r for r in read_tsv(io.join(trial_dir(plan.args.save_dir, t.number), "valid.log.tsv"))
                if isinstance(r.get(metric), (int, float)) and isinstance(r.get("samples"), (int, float))]
        if not rows:
            continue
        state = t.state.name.lower()
        x = [r["samples"] / 1000 for r in rows]
        y = [r[metric] for r in rows]
        is_best = best is not None and t.number == best.number
        color = "#2ca02c" if is_best else STATE_COLORS.get(state, "#7f7f7f")
        label = f"trial {t.number} (best)" if is_best else (state if state not in drawn else None)
        drawn.add(state)
        ax.plot(x, y, color=color, linewidth=2.4 if is_best else 1.0, alpha=1.0 if is_best else 0.75,
                marker="o", markersize=2.5, label=label, zorder=3 if is_best else 2)
        if state == "pruned":
            ax.plot(x[-1], y[-1], marker="x", color="#555555", markersize=6, zorder=2)
        if is_best:
            step = t.user_attrs.get("best_step")
            at = [r for r in rows if r.get("step") == step] or rows
            ax.plot(at[0]["samples"] / 1000, t.value, marker="*", color="#2ca02c", markersize=16, zorder=4,
                    markeredgecolor="black")
    counts = {}
    for t in trials:
        counts[t.state.name.lower()] = counts.get(t.state.name.lower(), 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    title = f"x-tune: {len(trials)} trials ({summary})"
    if best is not None:
        title += f"; best {metric} {best.value:.4g} (trial {best.number})"
    ax.set_title(title, fontsize=11)
    ax.set_xlabel("thousand samples seen")
    ax.set_ylabel(f"{metric} on {plan.base_args.valid_subset}")
    ax.grid(True, color="#dddddd", linewidth=0.7)
    if drawn:
        ax.legend(loc="best", fontsize=9)
    save_figure(figure, path)


def remove_checkpoints_below(plan: TunePlan, trial: Any) -> list[str]:
    """save_above_score: the checkpoints of a finished trial whose best is not better than it; removed paths."""
    threshold = plan.args.save_above_score
    if threshold is None:
        return []
    best = trial.user_attrs.get("best_score")
    better = best is not None and (best > threshold if plan.direction == "maximize" else best < threshold)
    if better:
        return []

    folder = trial_dir(plan.args.save_dir, trial.number)
    if not io.isdir(folder):
        return []
    removed = [path for _, path in list_checkpoints(folder)]
    removed += [io.join(folder, name) for name in io.listdir(folder)
                if name.startswith("state") and name.endswith(".pt")]
    for path in removed:
        io.remove(path)
    if io.exists(io.join(folder, INDEX_FILE)):
        io.remove(io.join(folder, INDEX_FILE))  # <best>/<last> must not name files that are gone
        removed.append(io.join(folder, INDEX_FILE))
    return removed
