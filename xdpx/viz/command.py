"""The x-viz command: plots of a run (or of each run a glob matches) against reference runs.

    {
      save_dir: outputs/runs/reviews_cnn_bs64        # or a glob: outputs/runs/reviews_*
      label: bs64
      ref_dir: {bs32: outputs/runs/reviews_cnn_bs32}  # a path, a list of paths, or {label: path}
      figext: png
      walltime: false
    }

The figures are written to <save_dir>/plots/. x-train calls :func:`plot_run` after its evaluations
(without references). Nothing here imports torch or matplotlib at module level.
"""

from __future__ import annotations

from typing import Any

from xdpx import io
from xdpx.command import Command, commands
from xdpx.config.options import Args, Option
from xdpx.errors import UserError
from xdpx.io.ownership import Output
from xdpx.viz.runs import find_runs, is_run_dir, read_run

PLOTS_DIR = "plots"
FIGURE_FORMATS = ("png", "pdf", "svg", "jpg")

VIZ_OPTIONS = [
    Option("save_dir", str,
           doc="the run to plot (its plots go to save_dir/plots); a glob pattern (runs/cnn_*) plots each "
               "matching run against the references; a folder of runs (an x-tune study) plots each run in it"),
    Option("label", str | None, default=None, doc="the run's name in the legends (default: its folder name)"),
    Option("ref_dir", str | list[str] | dict[str, str] | None, default=None,
           doc="reference runs drawn in the same figures, aligned by training samples seen: a path, a list "
               "of paths (labelled by folder name), or {label: path}"),
    Option("figext", str, default="png", choices=FIGURE_FORMATS, doc="file format of the figures"),
    Option("walltime", bool, default=False,
           doc="x axis in minutes of training time instead of updates (aligned by samples)"),
]


def reference_dirs(ref_dir: Any) -> list[tuple[str | None, str]]:
    """(label or None, path) of each reference run."""
    if ref_dir is None:
        return []
    if isinstance(ref_dir, str):
        return [(None, ref_dir)]
    if isinstance(ref_dir, dict):
        return [(str(label), path) for label, path in ref_dir.items()]
    return [(None, path) for path in ref_dir]


def matching_runs(pattern: str) -> list[str]:
    """Run directories a save_dir names: the path itself, every run a glob pattern matches, or every run
    below a folder that is not itself a run (an x-tune study: its trials)."""
    if any(ch in pattern for ch in "*?["):
        return [p for p in io.glob(pattern.rstrip("/")) if is_run_dir(p)]
    path = pattern.rstrip("/")
    if not is_run_dir(path) and io.isdir(path):
        return find_runs(path) or [path]
    return [path]


def plot_run(save_dir: str, label: str | None = None, refs: list[tuple[str | None, str]] | None = None,
             figext: str = "png", walltime: bool = False) -> list[str]:
    """Draw every figure of ``save_dir`` (with the reference runs) into save_dir/plots; the paths."""
    from xdpx.viz.plots import plot_runs  # lazy: loads numpy

    # lazy: x-train imports this module; figures only when drawn
    from xdpx.viz.reliability import plot_reliability

    main = read_run(save_dir, label)
    references = [read_run(path, ref_label) for ref_label, path in refs or []
                  if path.rstrip("/") != save_dir.rstrip("/")]
    out_dir = io.join(save_dir, PLOTS_DIR)
    # the reliability diagram when the run has been calibrated (x-script calibrate)
    return plot_runs([main, *references], out_dir, figext, walltime) + plot_reliability(save_dir, out_dir, figext)


@commands.register("x-viz")
class VizCommand(Command):
    """Plot a run's logs (and reference runs aligned by samples seen) into save_dir/plots (docs/viz.md)."""

    name = "x-viz"
    example = "x-viz examples/reviews/viz.hjson"
    group = "viz"
    output_key = "save_dir"

    def options(self) -> list[Any]:
        return list(VIZ_OPTIONS)

    def outputs(self, args: Args) -> list[Output]:
        # each run's plots folder; x-train draws the same figures there after its evaluations
        return [Output("save_dir", io.join(run, PLOTS_DIR), "folder", also=("x-train",))
                for run in matching_runs(args.save_dir)]

    def inputs(self, args: Args) -> list[tuple[str, str]]:
        return [("ref_dir", path) for _, path in reference_dirs(args.ref_dir)]

    def run(self, args: Args, dry: bool = False) -> None:
        runs = matching_runs(args.save_dir)
        if not runs:
            raise UserError(f"save_dir {args.save_dir!r} matches no run directory (a folder with args.py "
                            "and train.log.tsv)")
        refs = reference_dirs(args.ref_dir)

        missing = [path for _, path in refs if not is_run_dir(path.rstrip("/"))]
        if missing:
            raise UserError(f"ref_dir: {', '.join(missing)} is not a run directory (a folder with args.py and "
                            "train.log.tsv): check the path")
        if dry:
            print(f"# would plot {', '.join(runs)}" + (f" against {', '.join(p for _, p in refs)}" if refs else ""))
            return
        for save_dir in runs:
            written = plot_run(save_dir, args.label if len(runs) == 1 else None, refs, args.figext,
                               args.walltime)
            print(f"x-viz: {len(written)} figures in {io.join(save_dir, PLOTS_DIR)}: "
                  + ", ".join(io.basename(p) for p in written))
