"""Reading a run directory for plots and tools: args.py, train.log.tsv, valid.log.tsv, checkpoints.

Everything is read from save_dir alone (invariant 1 of docs/architecture.md); nothing here imports torch.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from xdpx import io
from xdpx.config.writers import read_args
from xdpx.errors import UserError
from xdpx.runtime.run_files import match_subsets

# Columns the trainer writes itself; any other column is a user summary (train) or a metric (valid).
TRAIN_COLUMNS = ("epoch", "step", "samples", "loss", "grad_norm", "clip_rate", "lr", "samples_per_s",
                 "loss_scale", "batch_size", "update_freq")
VALID_BOOKKEEPING = ("epoch", "step", "samples", "train_loss", "best_step")
LOSS_NAMES = re.compile(r"(^|[_.])(loss|mse|mae|rmse|perplexity|ppl|error|err)($|_)")


def is_lower_better(metric: str, ascending_metric: bool = True, major_metric: str | None = None) -> bool:
    """Direction of a metric: losses and errors are lower-is-better whatever ascending_metric says;
    the major metric follows ascending_metric (on every valid split: ``test.<major_metric>`` too); the
    built-in metrics (accuracy, f1, auc, pearson...) are higher-is-better."""
    if LOSS_NAMES.search(metric):
        return True
    if major_metric is not None and major_metric in (metric, metric.split(".", 1)[-1]):
        return not ascending_metric
    return False


def read_tsv(path: str) -> list[dict[str, Any]]:
    """Rows of a tsv log as dicts; numbers parsed, empty cells None. A missing file gives no rows."""
    if not io.exists(path):
        return []
    with io.open(path) as f:
        lines = f.read().splitlines()
    if not lines:
        return []
    header = lines[0].split("\t")
    rows = []
    for line in lines[1:]:
        if not line.strip():
            continue
        cells = line.split("\t")
        rows.append({name: _number(cells[i]) if i < len(cells) else None for i, name in enumerate(header)})
    return rows


def _number(text: str) -> Any:
    if text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value


@dataclass
class Run:
    """One run directory, read once."""

    save_dir: str
    label: str
    args: dict[str, Any]
    train: list[dict[str, Any]]
    valid: list[dict[str, Any]]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def major_metric(self) -> str | None:
        return self.args.get("major_metric")

    @property
    def ascending_metric(self) -> bool:
        return bool(self.args.get("ascending_metric", True))

    def lower_is_better(self, metric: str) -> bool:
        return is_lower_better(metric, self.ascending_metric, self.major_metric)

    @property
    def update_size(self) -> int | None:
        """Samples per update (all processes): the largest samples/updates ratio between log rows (an
        epoch's last update may be short, never longer); from args.py when no row is logged yet."""
        best = 0.0
        previous = (0, 0)
        for row in self.train:
            step, samples = row.get("step"), row.get("samples")
            if step is None or samples is None or step <= previous[0]:
                continue
            best = max(best, (samples - previous[1]) / (step - previous[0]))
            previous = (step, samples)
        if best > 0:
            return int(round(best))
        if self.args.get("batch_size"):
            return int(self.args["batch_size"]) * int(self.args.get("update_freq") or 1)
        return None

    @property
    def valid_splits(self) -> list[str]:
        """The valid_subset split(s); the first one's metrics are the unprefixed columns of valid.log.tsv,
        the others' are ``<split>.<metric>``."""
        value = self.args.get("valid_subset")
        return [value] if isinstance(value, str) else list(value or [])

    def split_of(self, column: str) -> tuple[str, str]:
        """(valid split, metric) of a valid.log.tsv column: ``test.accuracy`` -> (test, accuracy)."""
        splits = self.valid_splits
        for split in splits[1:]:
            if column.startswith(split + "."):
                return split, column[len(split) + 1:]
        return (splits[0] if splits else "valid"), column

    def valid_metrics(self) -> list[str]:
        """Metric columns of valid.log.tsv (loss first), without the bookkeeping columns."""
        names: list[str] = []
        for row in self.valid:
            names += [k for k in row if k not in names]
        return [n for n in names if n not in VALID_BOOKKEEPING and not n.startswith("best_")]

    def summaries(self) -> list[str]:
        """User summary columns of train.log.tsv."""
        names: list[str] = []
        for row in self.train:
            names += [k for k in row if k not in names and k not in TRAIN_COLUMNS]
        return names

    def best(self, metric: str) -> tuple[int, float] | None:
        """(step, value) of the best evaluation for ``metric`` (the first one on ties)."""
        lower = self.lower_is_better(metric)
        found: tuple[int, float] | None = None
        for row in self.valid:
            value = row.get(metric)
            if not isinstance(value, (int, float)) or math.isnan(value):
                continue
            if found is None or (value < found[1] if lower else value > found[1]):
                found = (int(row["step"]), float(value))
        return found

    def train_sizes(self) -> list[tuple[str, int]]:
        """(split, samples) of each training split in the order of epoch 1."""
        sizes = self.args.get("data_size") or {}
        splits, _ = match_subsets(self.args.get("train_subset", "train"), sorted(sizes))
        return [(s, int(sizes[s])) for s in splits]

    def epoch_boundaries(self, last_samples: int) -> list[tuple[int, bool]]:
        """Samples seen at each epoch end (``True``) and, with lazy_load, each shard end (``False``),
        up to ``last_samples``. Shard order after epoch 1 follows the (seed, epoch) order of the
        trainer; with seed: null it is unknown, and the shards are drawn in their listed order."""
        sizes = self.train_sizes()
        total = sum(n for _, n in sizes)
        if total <= 0:
            return []
        marks: list[tuple[int, bool]] = []
        epoch, start = 1, 0
        while start < last_samples:
            order = [n for _, n in sizes]
            if self.args.get("lazy_load") and len(sizes) > 1:
                if epoch > 1 and self.args.get("seed") is not None:
                    from xdpx.runtime.seeding import epoch_rng  # lazy: loads torch, numpy

                    order = [order[i] for i in epoch_rng(int(self.args["seed"]), epoch, salt=1)
                             .permutation(len(order))]
                position = start
                for n in order[:-1]:
                    position += n
                    marks.append((position, False))
            start += total
            marks.append((start, True))
            epoch += 1
        return [(s, is_epoch) for s, is_epoch in marks if s <= last_samples]


def is_run_dir(path: str) -> bool:
    return io.exists(io.join(path, "args.py")) and (io.exists(io.join(path, "train.log.tsv"))
                                                    or io.exists(io.join(path, "valid.log.tsv")))


def read_run(save_dir: str, label: str | None = None) -> Run:
    """Read ``save_dir`` (args.py and the logs); a folder that is not a run is a clear error."""
    save_dir = save_dir.rstrip("/")
    args_path = io.join(save_dir, "args.py")
    if not io.exists(args_path):
        raise UserError(f"{save_dir} is not an x-train run directory (no args.py): check save_dir / ref_dir")
    return Run(save_dir, label or io.basename(save_dir), read_args(args_path), read_tsv(io.join(save_dir, "train.log.tsv")),
               read_tsv(io.join(save_dir, "valid.log.tsv")))


def find_runs(root: str) -> list[str]:
    """Every run directory at or below ``root`` (sorted); a run's own subfolders are not searched."""
    root = root.rstrip("/") or "/"
    if is_run_dir(root):
        return [root]
    if not io.isdir(root):
        return []
    found: list[str] = []
    for name in sorted(io.listdir(root)):
        path = io.join(root, name)
        if io.isdir(path) and not name.startswith("."):
            found += find_runs(path)
    return found
