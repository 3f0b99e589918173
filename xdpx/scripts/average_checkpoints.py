"""``x-script average_checkpoints SAVE_DIR (--last N | --best K) [--out PATH]``: average a run's weights.

Averages the checkpoint-<step>.pt files of one x-train run: the N latest (``--last N``) or the K with the
best major_metric in valid.log.tsv (``--best K``, in the run's direction: ascending_metric, lower for a
loss), among the checkpoints still on disk. Floating-point tensors are averaged (summed in float64, then
cast back to their type); integer tensors (counters such as BatchNorm's num_batches_tracked) come from the
newest checkpoint. The result is a weights checkpoint in the run's own format (a state_dict saved with
torch.save), written to ``--out`` (default ``SAVE_DIR/averaged-last-N.pt`` / ``averaged-best-K.pt``: a
name that ``<best>``, ``<last>`` and clean_checkpoints leave alone), for x-eval's and x-pred's
``checkpoint`` option and the exports. An existing file is replaced only if this tool wrote it.
"""

from __future__ import annotations

from typing import Any

from xdpx import io
from xdpx.command import script
from xdpx.config.errors import ConfigError
from xdpx.errors import UserError
from xdpx.io.ownership import is_run_dir, record
from xdpx.models.checkpoints import list_checkpoints, load_weights, save_torch
from xdpx.scripts.result_tables import check_writable, split_flags

USAGE = "usage: x-script average_checkpoints SAVE_DIR (--last N | --best K) [--out PATH]"
TOOL = "average_checkpoints"


def choose(save_dir: str, last: int | None, best: int | None) -> list[tuple[int, str]]:
    """(step, path) of the checkpoints to average, oldest first."""
    # lazy: the run reader (xdpx.viz) waits for a run; x-script --help imports every tool
    from xdpx.viz.runs import read_run

    saved = list_checkpoints(save_dir)
    count = last if last is not None else best
    if last is not None:
        chosen = saved[-last:]
    else:
        run = read_run(save_dir)
        metric = run.major_metric or "loss"
        lower = run.lower_is_better(metric)
        on_disk = dict(saved)
        scores = {int(r["step"]): r[metric] for r in run.valid if int(r["step"]) in on_disk
                  and isinstance(r.get(metric), (int, float)) and r[metric] == r[metric]}
        # the earlier step wins a tie, as the run's own best does
        ranked = sorted(scores, key=lambda step: (scores[step] if lower else -scores[step], step))[:best]
        chosen = sorted((step, on_disk[step]) for step in ranked)
    if len(chosen) < (count or 0):
        scored = "" if last is not None else f", {len(chosen)} of them with a score in valid.log.tsv"
        raise UserError(f"{TOOL}: {save_dir} holds {len(saved)} checkpoint(s) "
                        f"({', '.join(str(s) for s, _ in saved) or 'none'}){scored}: fewer than the {count} "
                        "asked for")
    return chosen


def average(paths: list[str]) -> dict[str, Any]:
    """The mean of the floating-point tensors of the state_dicts at ``paths``; other tensors from the last."""
    import torch  # lazy: torch is heavy; x-script --help imports every tool

    first = load_weights(paths[0])
    sums = {k: v.double() for k, v in first.items() if torch.is_floating_point(v)}
    newest = first
    for path in paths[1:]:
        weights = load_weights(path)
        if weights.keys() != first.keys():
            differing = sorted(set(weights) ^ set(first))[:3]
            raise UserError(f"{TOOL}: {path} and {paths[0]} hold different tensors ({differing}): "
                            "not checkpoints of one model")
        for key in sums:
            if weights[key].shape != first[key].shape:
                raise UserError(f"{TOOL}: {key} is {tuple(weights[key].shape)} in {path} but "
                                f"{tuple(first[key].shape)} in {paths[0]}")
            sums[key] += weights[key].double()
        newest = weights
    return {k: (sums[k] / len(paths)).to(v.dtype) if k in sums else v.clone() for k, v in newest.items()}


def parse(argv: list[str]) -> tuple[str, int | None, int | None, str | None]:
    positional, values = split_flags(argv, {"last": None, "best": None, "out": None}, USAGE)
    if len(positional) != 1 or (values["last"] is None) == (values["best"] is None):
        raise ConfigError([f"give one SAVE_DIR and one of --last N, --best K. {USAGE}"])
    counts = {}
    for name in ("last", "best"):
        raw = values[name]
        if raw is not None:
            if not raw.isdigit() or int(raw) < 1:
                raise ConfigError([f"--{name} {raw!r}: must be a whole number >= 1. {USAGE}"])
            counts[name] = int(raw)
    return positional[0], counts.get("last"), counts.get("best"), values["out"]


@script(TOOL)
def main(argv: list[str]) -> int:
    """Average the N latest or the K best checkpoints of an x-train run into one weights checkpoint.

    --last N or --best K (by the major metric of valid.log.tsv); --out, default SAVE_DIR/averaged-last-N.pt
    or averaged-best-K.pt; x-eval, x-pred and the exports accept the result."""
    save_dir, last, best, out = parse(argv)
    if not io.isdir(save_dir) or not is_run_dir(save_dir):
        raise UserError(f"{TOOL}: {save_dir} is not a run directory of x-train")
    out = out or io.join(save_dir, f"averaged-{'last' if last else 'best'}-{last or best}.pt")
    check_writable(TOOL, [("out", out)], [("save_dir", save_dir)])
    chosen = choose(save_dir, last, best)
    weights = average([path for _, path in chosen])
    folder = io.dirname(out)
    if folder:
        io.makedirs(folder)
    save_torch(weights, out)
    record(TOOL, out)
    print(f"averaged {len(chosen)} checkpoint(s) of update {', '.join(str(s) for s, _ in chosen)} "
          f"-> {out}")
    return 0
