"""The figures of x-viz: one per metric, loss, lr, grad norm, clip rate, loss scale and user summary.

Each figure shows the main run and its reference runs on one x axis (see align.py): valid curves solid
with a dot per evaluation, train curves dashed, red vertical lines at the main run's epoch ends (dotted,
lighter: lazy_load shard ends), a green dot on each run's best evaluation. matplotlib is imported here
only (Agg, no display, no pyplot state), when a plot is drawn.
"""

from __future__ import annotations

import io as stdio
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from xdpx import io
from xdpx.viz.align import Axis
from xdpx.viz.runs import Run

MAIN_WIDTH, REF_WIDTH = 2.2, 1.5
EPOCH_COLOR, BEST_COLOR = "#d62728", "#2ca02c"
COLORS = ["#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"]
# name -> (title, y label, log scale)
TRAIN_FIGURES = {
    "lr": ("learning rate", "lr", False),
    "grad_norm": ("gradient norm (before clipping)", "L2 norm of the update's gradient", False),
    "clip_rate": ("clip rate", "fraction of updates clipped", False),
    "loss_scale": ("fp16 loss scale", "loss scale", True),
}


def _figure(title: str, axis: Axis, ylabel: str, log_y: bool = False, subtitle: str = "") -> tuple[Any, Any]:
    from matplotlib.figure import Figure  # lazy: loads matplotlib

    # fixed margins: a layout engine would draw every figure twice
    figure = Figure(figsize=(10.5, 5.2), dpi=100)
    figure.subplots_adjust(left=0.075, right=0.745, bottom=0.105, top=0.835)  # the legend goes on the right
    ax = figure.add_subplot()
    figure.text(0.012, 0.965, title, fontsize=13, fontweight="bold", va="top")
    if subtitle:
        figure.text(0.012, 0.915, subtitle, fontsize=9, color="#555555", va="top")
    ax.set_xlabel(axis.label)
    ax.set_ylabel(ylabel)
    ax.grid(True, color="#dddddd", linewidth=0.7)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    if log_y:
        ax.set_yscale("log")
    if not axis.walltime:
        size = axis.update_size
        top = ax.secondary_xaxis("top", functions=(lambda x: x * size / 1000.0, lambda s: s * 1000.0 / size))
        top.set_xlabel("thousand samples seen", fontsize=9, color="#555555", loc="right")
        top.tick_params(labelsize=8, colors="#555555")
    return figure, ax


def _numbers(rows: list[dict[str, Any]], column: str) -> list[dict[str, Any]]:
    return [r for r in rows if isinstance(r.get(column), (int, float)) and math.isfinite(r[column])
            and r.get("samples") is not None]


def _mark_epochs(ax: Any, axis: Axis, runs: Sequence[Run]) -> bool:
    """Red lines at the main run's epoch (and shard) ends within the plotted range; True if any."""
    last = max((r["samples"] for run in runs for r in run.train + run.valid if r.get("samples") is not None),
               default=0)
    marks = axis.main.epoch_boundaries(int(last))
    if not marks:
        return False
    positions = axis.x_of_samples(axis.main, np.array([float(s) for s, _ in marks]))
    for x, (_, is_epoch) in zip(positions, marks):
        ax.axvline(x, color=EPOCH_COLOR, linewidth=1.1 if is_epoch else 0.8, alpha=0.55 if is_epoch else 0.3,
                   linestyle="-" if is_epoch else ":", zorder=1)
    return any(is_epoch for _, is_epoch in marks)


def _legend(ax: Any, runs: Sequence[Run], styles: list[str], extra: list[Any]) -> None:
    from matplotlib.lines import Line2D  # lazy: loads matplotlib

    handles = [Line2D([], [], color=COLORS[i % len(COLORS)], linewidth=MAIN_WIDTH if i == 0 else REF_WIDTH,
                      label=run.label + ("" if i == 0 else " (ref)")) for i, run in enumerate(runs)]
    if "valid" in styles and "train" in styles:
        handles += [Line2D([], [], color="#444444", linewidth=1.4, marker="o", markersize=3, label="valid"),
                    Line2D([], [], color="#444444", linewidth=1.4, linestyle="--", label="train")]
    ax.legend(handles=handles + extra, loc="upper left", bbox_to_anchor=(1.015, 1.0), fontsize=9,
              frameon=False, borderaxespad=0.0)


def _style_handles(has_epochs: bool) -> list[Any]:
    from matplotlib.lines import Line2D  # lazy: loads matplotlib

    if not has_epochs:
        return []
    return [Line2D([], [], color=EPOCH_COLOR, alpha=0.6, linewidth=1.1, label="epoch end")]


def _best_handle(run: Run, color: str, best: tuple[int, float], main: bool) -> Any:
    """The legend entry of a run's best evaluation: the value and the run's own update."""
    from matplotlib.lines import Line2D  # lazy: loads matplotlib

    label = f"best{'' if main else ' of ' + run.label}: {best[1]:.4g}\nat {'' if main else 'its '}update {best[0]}"
    return Line2D([], [], color=BEST_COLOR, marker="o", linestyle="", markersize=8,
                  markeredgecolor=_best_edge(color, main), markeredgewidth=1.5, label=label)


def _best_edge(color: str, main: bool) -> str:
    return "#145214" if main else color


def plot_metric(axis: Axis, runs: Sequence[Run], train_column: str | None, valid_column: str | None,
                title: str, ylabel: str, log_y: bool = False, hline: tuple[float, str] | None = None,
                subtitle: str = "") -> Any:
    """One figure: ``valid_column`` of valid.log.tsv (solid, best dot) and ``train_column`` of
    train.log.tsv (dashed) for every run. None when no run has a value to draw."""
    figure, ax = _figure(title, axis, ylabel, log_y, subtitle)
    drawn, styles, bests = False, [], []
    for i, run in enumerate(runs):
        color, width = COLORS[i % len(COLORS)], MAIN_WIDTH if i == 0 else REF_WIDTH
        if train_column:
            rows = _numbers(run.train, train_column)
            rows = [r for r in rows if not log_y or r[train_column] > 0]
            if rows:
                linestyle = "--" if valid_column else "-"
                # train rows are noisy: thinner and lighter when the valid curve is drawn over them
                ax.plot(axis.x(run, rows), [r[train_column] for r in rows], color=color,
                        linewidth=width * (0.55 if valid_column else 0.8), linestyle=linestyle,
                        alpha=0.6 if valid_column else 0.9, zorder=2)
                drawn = True
                styles.append("train")
        if valid_column:
            rows = _numbers(run.valid, valid_column)
            if rows:
                xs = axis.x(run, rows)
                ax.plot(xs, [r[valid_column] for r in rows], color=color, linewidth=width, marker="o",
                        markersize=3.5 if i == 0 else 2.5, zorder=3)
                drawn = True
                styles.append("valid")
                best = run.best(valid_column)
                if best is not None:
                    at = [k for k, r in enumerate(rows) if int(r["step"]) == best[0]][0]
                    ax.plot([xs[at]], [best[1]], marker="o", markersize=10 if i == 0 else 8, color=BEST_COLOR,
                            markeredgecolor=_best_edge(color, i == 0), markeredgewidth=1.5, zorder=5, linestyle="")
                    bests.append(_best_handle(run, color, best, i == 0))
    if not drawn:
        return None
    if hline is not None:
        ax.axhline(hline[0], color="#555555", linewidth=1.0, linestyle="-.", zorder=1)
        ax.annotate(hline[1], (0.005, hline[0]), xycoords=("axes fraction", "data"), ha="left", va="bottom",
                    fontsize=9, color="#555555")
    has_epochs = _mark_epochs(ax, axis, runs)
    _legend(ax, runs, styles, _style_handles(has_epochs) + bests)
    ax.set_xlim(left=0)
    return figure


def save_figure(figure: Any, path: str) -> None:
    """Write a figure through xdpx.io (any path; the file appears complete)."""
    buffer = stdio.BytesIO()
    figure.savefig(buffer, format=path.rsplit(".", 1)[-1])
    with io.open(path, "wb") as f:
        f.write(buffer.getvalue())


def safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "metric"


def plot_runs(runs: Sequence[Run], out_dir: str, figext: str = "png", walltime: bool = False) -> list[str]:
    """Every figure for ``runs`` (the first is the main run) into ``out_dir``; the paths written."""
    main = runs[0]
    axis = Axis(main, walltime)
    valid_subset = main.split_of("loss")[0]  # the first valid split; the others' columns are <split>.<metric>
    figures: list[tuple[str, Any]] = []

    figures.append(("loss", plot_metric(axis, runs, "loss", "loss", f"loss (train and {valid_subset})",
                                        main.args.get("loss") or "loss")))
    # single-label classification: micro precision/recall/f1 equal accuracy; one figure says it all
    same: dict[str, list[str]] = {}
    first_of: dict[tuple[Any, ...], str] = {}
    for metric in main.valid_metrics():
        if metric == "loss":
            continue
        series = tuple(round(r[metric], 9) if isinstance(r.get(metric), float) else r.get(metric)
                       for r in main.valid)
        if series in first_of and any(v is not None for v in series):
            same[first_of[series]].append(metric)
        else:
            first_of[series] = metric
            same[metric] = []
    for metric, equal in same.items():
        split, name = main.split_of(metric)
        title = f"{name} on {split}" + (" (major metric)" if metric == main.major_metric else "")
        subtitle = f"same values, not drawn again: {', '.join(equal)}" if equal else ""
        figures.append((metric, plot_metric(axis, runs, None, metric, title, metric, subtitle=subtitle)))
    for column, (title, ylabel, log_y) in TRAIN_FIGURES.items():
        hline = None
        if column == "grad_norm" and main.args.get("clip_norm"):
            hline = (float(main.args["clip_norm"]), f"clip_norm {main.args['clip_norm']:g}")
        figures.append((column, plot_metric(axis, runs, column, None, title, ylabel, log_y, hline)))
    taken = {name for name, _ in figures}
    for summary in main.summaries():
        name = summary if summary not in taken else f"summary_{summary}"
        figures.append((name, plot_metric(axis, runs, summary, None, f"{summary} (summary, train)",
                                          summary)))

    io.makedirs(out_dir)
    written = []
    for name, figure in figures:
        if figure is None:
            continue
        path = io.join(out_dir, f"{safe_name(name)}.{figext}")
        save_figure(figure, path)
        written.append(path)
    return written
