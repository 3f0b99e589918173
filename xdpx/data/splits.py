"""data_files -> the splits to write: which input files make which split."""

from __future__ import annotations

import os
import re
from typing import Any

from xdpx import io
from xdpx.data.tables import is_dataset_folder  # a save_to_disk folder is one input

SPLIT_NAME = re.compile(r"^[A-Za-z0-9_\-]+$")


def split_name_of(path: str) -> str:
    """``train3.txt`` -> ``train3``: the file name without its extension(s)."""
    return io.basename(path).split(".")[0]


def _normal(path: str) -> str:
    return path.rstrip("/") if io.is_remote(path) else os.path.abspath(path)


def same_folder(a: str, b: str) -> bool:
    return _normal(a) == _normal(b)


def _inside(path: str, folder: str) -> bool:
    return _normal(path).startswith(_normal(folder).rstrip("/") + "/")


def _matches(data_source: str, pattern: str, exclude: str | None = None) -> list[str]:
    full = io.join(data_source, pattern)
    if any(c in pattern for c in "*?["):
        found = [p for p in io.glob(full) if io.isfile(p) or is_dataset_folder(p)]
    else:
        found = [full] if io.isfile(full) or is_dataset_folder(full) else []
    # data_dir inside data_source: a recursive glob must not read x-prepro's own outputs as raw data.
    return [p for p in found if not (exclude and _inside(p, exclude))]


def resolve_splits(data_source: str, data_files: Any,
                   exclude: str | None = None) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """[(split, [files...])] in order, and the problems found (missing files, bad or clashing names).

    ``data_files`` is a glob, a list of globs/paths (split = file name without extension), or a dict
    ``{relative path: split name}`` (several paths may form one split; they are read in order).
    Files under ``exclude`` (the data_dir, when it lies inside data_source) are never inputs.
    """
    problems: list[str] = []
    splits: dict[str, list[str]] = {}
    if isinstance(data_files, dict):
        for rel, split in data_files.items():
            found = _matches(data_source, rel, exclude)
            if not found:
                hint = ""
                if _matches(data_source, str(split)):
                    hint = f" (the mapping is {{file: split}}: did you mean {{{split!r}: {rel!r}}}?)"
                problems.append(f"data_files: no file {rel!r} in {data_source}{hint}")
            splits.setdefault(str(split), []).extend(f for f in found if f not in splits.get(str(split), []))
    else:
        patterns = [data_files] if isinstance(data_files, str) else list(data_files)
        for pattern in patterns:
            found = _matches(data_source, pattern, exclude)
            if not found:
                problems.append(f"data_files: nothing matches {pattern!r} in {data_source}")
            for path in found:
                name = split_name_of(path)
                if name in splits and path not in splits[name]:
                    problems.append(f"data_files: {splits[name][0]} and {path} both make split {name!r}; "
                                    "give a {file: split} mapping to name them")
                splits.setdefault(name, [path])
    for name in splits:
        if not SPLIT_NAME.match(name):
            problems.append(f"data_files: split name {name!r} may hold only letters, digits, '_' and '-'")
    return list(splits.items()), problems
