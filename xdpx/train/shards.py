"""lazy_load while x-prepro still writes: the training shards named in train_subset that are not
written yet, and the wait for each one when training reaches it.

x-prepro moves each finished split into data_dir and then rewrites meta.hjson (atomically) to list it in
``data_size``: a split is ready once meta.hjson lists it. Patterns (``train*``) match the splits ready
at the start; plain names may name shards still to come, in the order training reads them.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable
from typing import Any

from xdpx.data.meta import read_meta
from xdpx.errors import UserError
from xdpx.runtime.run_files import subsets


def ready_splits(data_dir: str) -> list[str]:
    """The splits meta.hjson lists (x-prepro's commit mark), sorted."""
    meta = read_meta(data_dir) or {}
    return sorted(meta.get("data_size") or {})


def is_pattern(name: str) -> bool:
    return any(ch in name for ch in "*?[")


def planned_shards(train_subset: str | list[str], ready: list[str]) -> tuple[list[str], list[str]]:
    """(the shards in training order, those of them not written yet): patterns expand to ready splits,
    plain names are kept even when their shard is still to come."""
    planned: list[str] = []
    for entry in subsets(train_subset):
        names = sorted(s for s in ready if fnmatch.fnmatchcase(s, entry)) if is_pattern(entry) else [entry]
        planned += [n for n in names if n not in planned]
    return planned, [s for s in planned if s not in ready]


class ShardWaiter:
    """``wait(split)`` returns once meta.hjson lists ``split``; after ``timeout`` seconds it raises a
    UserError that says what to do (the run keeps its last saved state)."""

    def __init__(self, data_dir: str, timeout: float, say: Callable[[str], Any], poll: float = 0.5) -> None:
        self.data_dir, self.timeout, self.say, self.poll = data_dir, timeout, say, poll

    def wait(self, split: str) -> None:
        if split in ready_splits(self.data_dir):
            return

        self.say(f"lazy_load: waiting for shard {split!r} (x-prepro has not written it to {self.data_dir} yet; "
                 f"at most {self.timeout:g}s, lazy_load_wait)")
        started = time.monotonic()
        while split not in ready_splits(self.data_dir):
            if time.monotonic() - started > self.timeout:
                raise UserError(f"lazy_load: shard {split!r} of train_subset did not appear in {self.data_dir}/"
                                f"meta.hjson within {self.timeout:g}s (lazy_load_wait). Is x-prepro still writing "
                                "it? Once it is written, continue this run with resume: true (or raise "
                                "lazy_load_wait).")
            time.sleep(self.poll)
        self.say(f"lazy_load: shard {split!r} is ready after {time.monotonic() - started:.1f}s")
