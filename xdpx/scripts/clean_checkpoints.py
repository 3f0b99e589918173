"""``x-script clean_checkpoints ROOT [--dry]``: free the disk of checkpoints nobody needs.

In every x-train run directory at or below ROOT (xdpx.io.ownership.is_run_dir: a folder that only looks like
a run, without the marker or x-train's state and logs, is skipped), keep the best checkpoint (by the run's own major
metric and its direction: ascending_metric, and lower-is-better for losses), the last one, the ones
checkpoints.json names (so ``<best>`` and ``<last>`` keep resolving), their ``state-<step>.pt`` and the
resumable state.pt; delete the other ``checkpoint-<step>.pt`` and ``state-<step>.pt``. Prints what goes
and the bytes freed; ``--dry`` prints the same and deletes nothing.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from xdpx import io
from xdpx.command import script
from xdpx.config.errors import ConfigError
from xdpx.errors import UserError
from xdpx.io.ownership import RUN_MARKER, is_run_dir
from xdpx.models.checkpoints import list_checkpoints, read_index

_FULL_STATE = re.compile(r"^state-(\d+)\.pt$")


def plan(save_dir: str) -> tuple[set[int], list[str], int | None]:
    """(steps kept, paths to delete, the best checkpoint's step or None) of one run."""
    # lazy: the run reader (xdpx.viz) waits for a run; x-script --help imports every tool
    from xdpx.viz.runs import read_run

    run = read_run(save_dir)
    checkpoints = list_checkpoints(save_dir)
    steps = {step for step, _ in checkpoints}
    keep: set[int] = set()
    best: int | None = None
    if steps:
        keep.add(max(steps))
        metric = run.major_metric or "loss"
        lower = run.lower_is_better(metric)
        scored = [(int(r["step"]), r[metric]) for r in run.valid
                  if int(r["step"]) in steps and isinstance(r.get(metric), (int, float)) and r[metric] == r[metric]]
        if scored:
            best = min(scored, key=lambda s: (s[1] if lower else -s[1], s[0]))[0]
            keep.add(best)
    for name in read_index(save_dir).values():
        # a name whose file is gone keeps nothing (saying "keep update 4" of a missing file would mislead)
        if isinstance(name, str) and (m := re.match(r"^checkpoint-(\d+)\.pt$", name)) and int(m.group(1)) in steps:
            keep.add(int(m.group(1)))
    delete = [path for step, path in checkpoints if step not in keep]
    delete += [io.join(save_dir, name) for name in io.listdir(save_dir)
               if (m := _FULL_STATE.match(name)) and int(m.group(1)) not in keep]
    return keep, sorted(delete), best


def describe_kept(keep: set[int], best: int | None) -> str:
    """What is kept, in words: ``keep checkpoints of update 650, 660``; said plainly when there is no best
    (no evaluation scored a saved checkpoint) or no checkpoint at all."""
    if not keep:
        return "no checkpoint to keep (the run saved none)"
    kept = f"keep checkpoints of update {', '.join(str(s) for s in sorted(keep))}"
    if best is None:
        kept += " (no best: no evaluation of the major metric scored a saved checkpoint; the last is kept)"
    return kept


def clean(root: str, dry: bool = False, out: Any = None) -> int:
    """Clean every run below ``root``; the bytes freed (or that would be with ``dry``)."""
    # lazy: the run reader (xdpx.viz) waits for a run; x-script --help imports every tool
    from xdpx.viz.runs import find_runs

    out = out or sys.stdout
    freed = 0
    for save_dir in find_runs(root):
        if not is_run_dir(save_dir):  # logs alone do not make checkpoints x-train's to delete
            print(f"{save_dir}: skipped, not a run directory of x-train (no {RUN_MARKER} marker, no args.py with "
                  "its state or train.log.tsv): its files are left alone", file=out)
            continue
        keep, delete, best = plan(save_dir)
        size = sum(io.size(p) for p in delete)
        freed += size
        print(f"{save_dir}: {describe_kept(keep, best)}; {'would delete' if dry else 'delete'} "
              f"{len(delete)} file(s), {size:,} bytes", file=out)
        for path in delete:
            print(f"  {'would remove' if dry else 'remove'} {io.basename(path)}", file=out)
            if not dry:
                io.remove(path)
    return freed


USAGE = "usage: x-script clean_checkpoints ROOT [--dry]"


@script("clean_checkpoints")
def main(argv: list[str]) -> int:
    """Delete all but the best and the last checkpoint of every run below ROOT: x-script clean_checkpoints ROOT [--dry]."""

    dry = "--dry" in argv
    roots = [a for a in argv if a != "--dry"]
    if len(roots) != 1:
        raise ConfigError(USAGE)
    if not io.isdir(roots[0]):
        raise UserError(f"clean_checkpoints: {roots[0]} is not a folder")
    freed = clean(roots[0], dry)
    print(f"{'would free' if dry else 'freed'} {freed:,} bytes ({freed / 2**20:.1f} MiB)")
    return 0
