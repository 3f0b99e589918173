"""The reliability diagram of a calibrated run: x-viz draws it into save_dir/plots/reliability.<ext> when the
run has a calibration.json (x-script calibrate), beside the curves of plots.py.

For each confidence bin of the split the temperature was fitted on: the accuracy of its samples against
their mean confidence, before (raw probabilities) and after temperature scaling, with the diagonal where
a 0.9 means right 9 times in 10, the samples per bin as bars below, and ECE in the legend.
"""

from __future__ import annotations

from typing import Any

from xdpx import io
from xdpx.metrics.calibration import read_record
from xdpx.viz.plots import safe_name, save_figure

FIGURE_NAME = "reliability"


def reliability_figure(record: dict[str, Any], title: str) -> Any:
    """The figure (matplotlib, no pyplot state) of a calibration record's bins before and after."""
    from matplotlib.figure import Figure  # lazy: matplotlib only when a figure is drawn

    figure = Figure(figsize=(7.5, 7.0), dpi=100)
    top, bottom = figure.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    figure.subplots_adjust(left=0.11, right=0.97, top=0.88, bottom=0.08, hspace=0.08)
    figure.text(0.012, 0.975, title, fontsize=12, fontweight="bold", va="top")
    figure.text(0.012, 0.935, f"{record['split']}, {record.get('samples', '?')} samples, temperature "
                f"{record['temperature']:.3g} (checkpoint {record['checkpoint']})", fontsize=9, color="#555555", va="top")
    top.plot([0, 1], [0, 1], color="#999999", linestyle="--", linewidth=1, label="perfectly calibrated")
    width = None
    for key, colour, name in (("before", "#d62728", "raw"), ("after", "#1f77b4", "calibrated")):
        bins = [b for b in record[key]["bins"] if b["count"]]
        width = width or (record[key]["bins"][0]["upper"] - record[key]["bins"][0]["lower"])
        top.plot([b["confidence"] for b in bins], [b["accuracy"] for b in bins], marker="o", color=colour,
                 label=f"{name}: ECE {record[key]['ece']:.4f}")
        offset = -width / 4 if key == "before" else width / 4
        bottom.bar([(b["lower"] + b["upper"]) / 2 + offset for b in bins], [b["count"] for b in bins],
                   width=width / 2, color=colour, alpha=0.7)
    top.set_ylabel("accuracy")
    top.set_xlim(0, 1)
    top.set_ylim(0, 1)
    top.grid(True, color="#dddddd", linewidth=0.7)
    top.legend(loc="upper left", fontsize=9)
    bottom.set_xlabel("confidence (probability of the predicted label)")
    bottom.set_ylabel("samples")
    bottom.grid(True, color="#dddddd", linewidth=0.7)
    return figure


def plot_reliability(save_dir: str, out_dir: str, figext: str = "png") -> list[str]:
    """Draw the run's reliability diagram into ``out_dir`` when it has a calibration record; the paths."""
    record = read_record(save_dir)
    if record is None or "before" not in record or "after" not in record:
        return []
    io.makedirs(out_dir)
    path = io.join(out_dir, f"{safe_name(FIGURE_NAME)}.{figext}")
    save_figure(reliability_figure(record, f"reliability of {io.basename(save_dir.rstrip('/'))}"), path)
    return [path]
