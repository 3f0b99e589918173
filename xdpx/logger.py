"""User summaries: values that model or loss code adds to the run's logs, as TensorBoard's add_summary.

    from xdpx.logger import log
    log.add_summary('attention_entropy', entropy)           # a scalar tensor or a float
    if not self.training:
        log.add_accumulative_summary('hits', (hits.detach().cpu(),), reduce_fn=hit_rate)

- ``add_summary`` during training: the column ``name`` of train.log.tsv holds the mean of the values
  added since the previous row (every call counts once, whatever the micro-batch). A name first added
  late still gets its column (earlier rows leave it empty).
- ``add_accumulative_summary`` during an evaluation: ``values`` of every batch are kept; when the
  evaluation ends, ``reduce_fn(list_of_values) -> {metric: value}`` is called and its metrics are
  written to that evaluation's row of valid.log.tsv.

Outside x-train (x-eval, x-pred, a notebook) and in the other cases (add_summary during an evaluation,
add_accumulative_summary during training) both calls do nothing, so model code can call them freely.
In a run of several processes, the main process's values are logged. The running sums are part of the
training state, so a resumed run logs the same values as one never interrupted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

TRAIN, VALID = "train", "valid"


def _as_float_sum(name: str, value: Any) -> Any:
    """A float, or a detached float64 scalar tensor (summed on its device: no sync per call)."""
    if isinstance(value, (int, float)):
        return float(value)
    numel = getattr(value, "numel", None)
    if numel is None:
        raise TypeError(f"log.add_summary({name!r}, ...): expected a float or a scalar tensor, "
                        f"got {type(value).__name__}")
    if numel() != 1:
        raise ValueError(f"log.add_summary({name!r}, ...): expected a scalar, got a tensor of shape "
                         f"{tuple(value.shape)}; reduce it first (e.g. x.mean())")
    return value.detach().reshape(()).double()


class SummaryLog:
    """The ``log`` object. The trainer switches its mode (``train`` / ``valid`` / off) and reads it."""

    def __init__(self) -> None:
        self.mode: str | None = None
        self.sums: dict[str, Any] = {}  # name -> sum of values since the last train.log.tsv row
        self.counts: dict[str, int] = {}
        self.accumulated: dict[str, tuple[list[Any], Callable[[list[Any]], dict[str, float]]]] = {}

    # ---- the user's side -------------------------------------------------------------------------
    def add_summary(self, name: str, value: Any) -> None:
        """Add a scalar to the column ``name`` of train.log.tsv (averaged over each log interval)."""
        if self.mode != TRAIN:
            return
        value = _as_float_sum(name, value)
        self.sums[name] = self.sums.get(name, 0.0) + value
        self.counts[name] = self.counts.get(name, 0) + 1

    def add_accumulative_summary(self, name: str, values: Any,
                                 reduce_fn: Callable[[list[Any]], dict[str, float]]) -> None:
        """Keep ``values`` of this evaluation batch; at the end of the evaluation ``reduce_fn`` gets the
        list of every batch's values and returns the ``{metric: value}`` written to valid.log.tsv."""
        if self.mode != VALID:
            return
        kept, _ = self.accumulated.setdefault(name, ([], reduce_fn))
        kept.append(values)

    # ---- the trainer's side ----------------------------------------------------------------------
    def train_means(self) -> dict[str, float]:
        """The mean of each summary since the last call; the sums start again."""
        means = {name: float(total) / self.counts[name] for name, total in self.sums.items()}
        self.sums, self.counts = {}, {}
        return means

    def begin_evaluation(self) -> None:
        self.accumulated = {}

    def end_evaluation(self) -> dict[str, float]:
        """The metrics of every accumulative summary of the evaluation that just ended."""
        metrics: dict[str, float] = {}
        for name, (kept, reduce_fn) in self.accumulated.items():
            result = reduce_fn(kept)
            if not isinstance(result, dict):
                raise TypeError(f"log.add_accumulative_summary({name!r}): reduce_fn must return a dict "
                                f"{{metric: value}}, got {type(result).__name__}")
            metrics.update({str(k): float(v) for k, v in result.items()})
        self.accumulated = {}
        return metrics

    def state_dict(self) -> dict[str, Any]:
        return {"sums": {k: float(v) for k, v in self.sums.items()}, "counts": dict(self.counts)}

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        state = state or {}
        self.sums, self.counts = dict(state.get("sums", {})), dict(state.get("counts", {}))

    def reset(self) -> None:
        self.mode, self.sums, self.counts, self.accumulated = None, {}, {}, {}


class _Mode:
    def __init__(self, summaries: SummaryLog, mode: str | None) -> None:
        self.summaries, self.mode = summaries, mode

    def __enter__(self) -> SummaryLog:
        self.previous, self.summaries.mode = self.summaries.mode, self.mode
        return self.summaries

    def __exit__(self, *exc: object) -> None:
        self.summaries.mode = self.previous


def mode(which: str | None) -> _Mode:
    """``with mode('train'):`` summaries added inside are recorded (the trainer uses this)."""
    return _Mode(log, which)


log = SummaryLog()
