"""The Optuna side of a study: storage, sampler, pruner, and which trials still count.

Storage: an SQLite file inside save_dir by default; any SQLAlchemy URL (postgresql://...) for workers
on several machines. Heartbeats mark the trials of a killed x-tune process as failed (Optuna's
``fail_stale_trials``); ``RetryHeartbeatStaleTrialCallback`` then enqueues them again with the same values.
Workers on one storage take turns through its lock (locking.py) to create its tables, reserve trials and
write the outputs; trial n is drawn with seed + n (sampling.py).
"""

from __future__ import annotations

import math
import random
import time
from typing import Any

from xdpx import io
from xdpx.errors import UserError
from xdpx.tune.locking import storage_lock

STUDY_DB = "study.db"
CREATE_SECONDS = 60.0  # how long a worker waits for another one creating the storage's tables
RETRY_HISTORY = "retry_history"  # system attribute of a retry: the numbers of the trials it replaces
# a trial asked for after another worker reached max_trials: only where the storage's lock is one process's
# (databases other than SQLite and PostgreSQL, locking.py); it runs nothing and is left out of the outputs
OVER_BUDGET = "xdpx_over_budget"


def storage_url(storage: str | None, save_dir: str) -> str:
    """The storage URL: ``storage`` itself, or an SQLite file in a local save_dir."""
    if storage:
        return storage
    if io.is_remote(save_dir):
        raise UserError(f"save_dir {save_dir} is remote: SQLite needs a local file, so set storage to a "
                        "database URL (e.g. postgresql://user@host:5432/db) that every worker can reach")
    return "sqlite:///" + io.abspath(io.join(save_dir, STUDY_DB))


def storage_problem(storage: str | None) -> str | None:
    """Why ``storage`` cannot be a database URL (checked before any work, so a typo leaves no study folder
    behind), or None. Only the URL and its dialect are checked here; a missing driver or an unreachable
    server are found when the storage is opened."""
    from sqlalchemy.engine import make_url  # lazy: loads sqlalchemy
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError  # lazy: loads sqlalchemy

    if storage is None:
        return None
    example = "e.g. postgresql://user@host:5432/db or sqlite:////abs/path/study.db; null: save_dir/study.db"
    try:
        make_url(storage).get_dialect()
    except NoSuchModuleError:  # a subclass of ArgumentError: first
        scheme = storage.split("://", 1)[0]
        return f"key 'storage': {redact_url(storage)!r}: SQLAlchemy has no database dialect or driver {scheme!r} ({example})"
    except ArgumentError:
        return f"key 'storage': {redact_url(storage)!r} is not a database URL ({example})"
    except ImportError as error:  # a dialect whose module fails to import
        return f"key 'storage': {redact_url(storage)!r}: {error}"
    return None


def redact_url(url: str) -> str:
    """The URL without its password, for messages."""
    from sqlalchemy.engine import make_url  # lazy: loads sqlalchemy

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url.split("@")[-1]


def open_storage(url: str, heartbeat_interval: int | None, max_retries: int = 0) -> Any:
    """An Optuna RDBStorage; with ``heartbeat_interval``, stale trials are failed and retried.

    Workers started together on a fresh storage would each create its tables (Optuna's ``create_all``,
    then a version row and alembic's stamp): one fails with "table studies already exists" or a unique
    constraint. The creation runs under the storage's lock (locking.py) and, where that lock cannot
    reach (another database), is retried for :data:`CREATE_SECONDS`."""
    import optuna  # lazy: loads optuna
    from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback  # lazy: loads optuna
    from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError  # lazy: loads sqlalchemy

    kwargs: dict[str, Any] = {}
    if url.startswith("sqlite:"):
        kwargs["engine_kwargs"] = {"connect_args": {"timeout": 60}}  # trials write to the file at once
    if heartbeat_interval:
        kwargs.update(heartbeat_interval=heartbeat_interval, grace_period=2 * heartbeat_interval,
                      heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=max_retries)
                      if max_retries else None)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    deadline = time.monotonic() + CREATE_SECONDS
    while True:
        try:
            with storage_lock(url, "schema"):
                return RDBStorage(url, **kwargs)
        except DBAPIError as error:
            if not is_creation_race(error):  # unreachable server, wrong credentials, no permission
                raise UserError(_cannot_open(url, error)) from None
            if time.monotonic() > deadline:
                raise UserError(f"storage {redact_url(url)}: its tables were still being created by another "
                                f"worker after {CREATE_SECONDS:.0f} s ({_first_line(error)}): run x-tune again") from None
            time.sleep(0.2 + random.random() / 2)  # the other worker's creation is done by then
        except (ArgumentError, NoSuchModuleError, ImportError, ValueError, OSError) as error:
            # a malformed URL, a missing driver, an SQLite folder that does not exist
            raise UserError(_cannot_open(url, error)) from None


def is_creation_race(error: Exception) -> bool:
    """Whether a database error is another worker creating the same tables or rows at the same moment."""
    from sqlalchemy.exc import IntegrityError  # lazy: loads sqlalchemy

    text = str(error).lower()
    return isinstance(error, IntegrityError) or any(
        s in text for s in ("already exists", "database is locked", "duplicate key", "concurrently updated"))


def _first_line(error: Exception) -> str:
    return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"


def _cannot_open(url: str, error: Exception) -> str:
    return (f"storage {redact_url(url)}: cannot open it ({_first_line(error)}): check the URL, the server and "
            "the driver (PostgreSQL: pip install 'psycopg[binary]')")


def reduction_factor(cull_keep_ratio: float) -> int:
    return max(2, round(1 / cull_keep_ratio))


def pruner_spec(args: Any, max_resource: int) -> dict[str, Any]:
    """What the pruner is built from: plain data, so a trial process builds the same one."""
    return {"kind": args.pruner, "min_resource": args.assess_start_step, "interval": args.assess_interval,
            "max_resource": max_resource, "keep": args.cull_keep_ratio, "min_ref": args.min_ref}


class MinRefPruner:
    """Optuna's pruner, except that no trial is pruned before ``min_ref`` trials completed.

    The wrapped pruner is still asked every time, so it records the rungs of every trial. Optuna asks
    ``study.pruner.prune(study, trial)`` only, so this needs no base class."""

    def __init__(self, pruner: Any, min_ref: int) -> None:
        self.pruner, self.min_ref = pruner, min_ref

    def prune(self, study: Any, trial: Any) -> bool:
        from optuna.trial import TrialState  # lazy: loads optuna

        prune = self.pruner.prune(study, trial)
        if prune and self.min_ref:
            done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            return len(done) >= self.min_ref
        return prune


def build_pruner(spec: dict[str, Any]) -> Any:
    # lazy: loads optuna
    from optuna.pruners import (
        HyperbandPruner,
        NopPruner,
        PercentilePruner,
        SuccessiveHalvingPruner,
    )

    kind = spec["kind"]
    if kind == "none":
        return NopPruner()
    if kind == "percentile":
        # the original XDPX's culling: from assess_start_step, every assess_interval, keep cull_keep_ratio
        return PercentilePruner(100 * spec["keep"], n_startup_trials=spec["min_ref"],
                                n_warmup_steps=spec["min_resource"], interval_steps=spec["interval"])
    factor = reduction_factor(spec["keep"])
    if kind == "hyperband":
        inner: Any = HyperbandPruner(min_resource=spec["min_resource"],
                                     max_resource=max(spec["max_resource"], spec["min_resource"]),
                                     reduction_factor=factor)
    else:
        inner = SuccessiveHalvingPruner(min_resource=spec["min_resource"], reduction_factor=factor)
    return MinRefPruner(inner, spec["min_ref"])


def build_sampler(tuner: str, seed: int, space: dict[str, Any] | None = None, taken: set[Any] | None = None) -> Any:
    """The study's sampler: trial n is drawn with ``seed + n``; with ``space``, never one of the ``taken``
    configurations (sampling.py)."""
    from xdpx.tune.sampling import TrialSeededSampler  # lazy: loads numpy, optuna

    return TrialSeededSampler(tuner, seed, space, taken)


def ask_new_trial(study: Any, tuner: str, seed: int, space: dict[str, Any], taken: set[Any]) -> Any:
    """The study's next trial, drawn as every worker draws it: trial n with ``seed + n``, never one of the
    ``taken`` configurations. The runner reserves trials through it, and ``x-tune --dry`` shows the first
    ones through it on an empty in-memory study, so what --dry prints is what trials 0, 1, 2 run."""
    study.sampler = build_sampler(tuner, seed, space, taken)
    return study.ask(space)


def hyperband_rungs(spec: dict[str, Any]) -> list[int]:
    """The steps where hyperband / successive_halving assess a trial (in base-config updates)."""
    if spec["kind"] in ("none",):
        return []
    if spec["kind"] == "percentile":
        return list(range(spec["min_resource"], spec["max_resource"], spec["interval"]))
    factor, rungs, step = reduction_factor(spec["keep"]), [], spec["min_resource"]
    while step < spec["max_resource"]:
        rungs.append(step)
        step *= factor
    return rungs


def hyperband_brackets(spec: dict[str, Any]) -> list[tuple[float, list[int]]]:
    """HyperBand's brackets as Optuna's HyperbandPruner builds them: (expected share of the trials, the
    updates where the bracket's trials are assessed), most aggressive first.

    Optuna makes floor(log_factor(max_resource / min_resource)) + 1 brackets; bracket b is a successive
    halving whose first assessment is at min_resource x factor^b, and it gets the share
    ceil(n x factor^s / (s + 1)) / total (s = n - 1 - b) of the trials, each trial drawn by a hash of its
    number. A bracket whose first assessment is at or after the last update prunes nothing."""
    factor, start = reduction_factor(spec["keep"]), spec["min_resource"]
    end = max(spec["max_resource"], start)
    count = math.floor(math.log(end / start, factor)) + 1  # Optuna's own formula, float rounding included
    budgets = [math.ceil(count * factor ** (count - 1 - b) / (count - b)) for b in range(count)]
    rungs = hyperband_rungs({**spec, "kind": "successive_halving"})
    return [(budget / sum(budgets), [r for r in rungs if r >= start * factor ** b]) for b, budget in enumerate(budgets)]


def counted_trials(trials: list[Any]) -> list[Any]:
    """The trials that use up max_trials: not waiting, not over budget, not failed and retried."""
    from optuna.trial import TrialState  # lazy: loads optuna

    retried = {number for t in trials for number in t.system_attrs.get(RETRY_HISTORY, [])}
    return [t for t in trials if t.state != TrialState.WAITING and t.number not in retried
            and not t.system_attrs.get(OVER_BUDGET)]


def is_finished(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))
