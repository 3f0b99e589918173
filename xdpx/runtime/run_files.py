"""A run's files as x-train writes them and x-eval, x-pred, x-viz and x-tune read them back.

The name of the resumable training state, the split names of a data_dir and how a run's subset patterns
(``train_subset: train*``) match them, and how a value is written in the logs (so x-eval prints the
numbers of valid.log.tsv digit for digit). No torch: x-train's checks use these under ``--dry``.
"""

from __future__ import annotations

import fnmatch
from typing import Any

from xdpx import io

STATE_FILE = "state.pt"


def subsets(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def available_splits(data_dir: str) -> list[str]:
    """Split names present in data_dir (every split has at least one ``.idx`` token field)."""
    if not io.isdir(data_dir):
        return []
    return sorted({name.split(".")[0] for name in io.listdir(data_dir) if name.endswith(".idx")})


def match_subsets(patterns: str | list[str] | None, splits: list[str]) -> tuple[list[str], list[str]]:
    """(matched split names in pattern order without repeats, patterns that matched nothing)."""
    matched: list[str] = []
    unmatched: list[str] = []
    for pattern in subsets(patterns):
        hits = sorted(s for s in splits if fnmatch.fnmatchcase(s, pattern))
        if not hits:
            unmatched.append(pattern)
        matched.extend(h for h in hits if h not in matched)
    return matched, unmatched


def format_value(value: Any) -> str:
    """A value as the logs (train.log.tsv, valid.log.tsv) and x-eval's output write it."""
    if isinstance(value, float):
        return f"{value:.6g}"
    return "" if value is None else str(value)
