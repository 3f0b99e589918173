"""The gradient inspector (``inspect_gradient: true``): mean and max |grad| of every parameter, drawn
on a log scale into save_dir/plots/gradients/<step>.png, to spot exploding or vanishing gradients and
where they start. The figure grows taller with the number of parameters (one row each)."""

from __future__ import annotations

import math
from typing import Any

GradientStats = list[tuple[str, float, float]]  # (parameter, mean |grad|, max |grad|)


def gradient_stats(named_parameters: Any) -> GradientStats:
    """(name, mean |grad|, max |grad|) of each parameter that has a gradient, in model order."""
    import torch  # lazy: loads torch

    stats = []
    with torch.no_grad():
        for name, parameter in named_parameters:
            if parameter.grad is None:
                continue
            grad = parameter.grad.detach().float().abs()
            stats.append((name, float(grad.mean()), float(grad.max())))
    return stats


def plot_gradients(stats: GradientStats, step: int, path: str, note: str = "") -> None:
    """A horizontal bar per parameter: max |grad| (light) behind mean |grad| (dark), log scale."""
    from matplotlib.figure import Figure  # lazy: loads matplotlib

    from xdpx.viz import save_figure  # lazy: loads numpy

    rows = len(stats)
    figure = Figure(figsize=(10, 1.6 + 0.28 * max(rows, 1)), dpi=100, layout="constrained")
    ax = figure.add_subplot()
    tiny = 1e-30  # zeros still get a bar at the bottom of the log axis
    positions = list(range(rows))[::-1]
    means = [max(m, tiny) for _, m, _ in stats]
    maxima = [max(x, tiny) for _, _, x in stats]
    ax.barh(positions, maxima, color="#9ecae1", height=0.8, label="max |grad|")
    ax.barh(positions, means, color="#08519c", height=0.45, label="mean |grad|")
    bad = [i for i, (_, m, x) in enumerate(stats) if not (math.isfinite(m) and math.isfinite(x))]
    for i in bad:
        ax.annotate("nan/inf", (1, positions[i]), xycoords=("axes fraction", "data"), ha="right", va="center",
                    color="#d62728", fontsize=8)
    ax.set_yticks(positions)
    ax.set_yticklabels([name for name, _, _ in stats], fontsize=8)
    ax.set_xscale("log")
    finite = [v for v in means + maxima if math.isfinite(v) and v > tiny]
    if finite:
        ax.set_xlim(min(finite) / 3, max(finite) * 3)
    ax.set_ylim(-0.7, rows - 0.3)
    ax.set_xlabel("|gradient| (log scale)")
    ax.set_title(f"gradients at update {step} (before clipping){note}", fontsize=12, fontweight="bold", loc="left")
    ax.grid(True, axis="x", color="#dddddd", which="both", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=2, fontsize=8, frameon=False)
    save_figure(figure, path)
