"""``x-script diff_meta A B``: what differs between two x-prepro outputs' meta.hjson.

A and B are data directories (or their meta.hjson files). Prints, with ``A -> B`` on each line:
the vocabulary (sizes from meta.hjson and vocab.txt, how many tokens only one side has, and the first
tokens whose ids differ), the target maps (labels only one side has, labels whose class id differs), the
sample counts per split (data_size), and every other option of meta.hjson that differs (processor,
tokenizer, max_len, lower, ...). Nothing differs: says so, exit 0.
"""

from __future__ import annotations

from typing import Any

from xdpx import io
from xdpx.command import script
from xdpx.config.errors import ConfigError
from xdpx.data.dictionary import read_vocab
from xdpx.data.meta import read_meta
from xdpx.errors import UserError

# facts whose differences are reported in their own sections, or that differ for every re-run
OWN_SECTIONS = {"vocab_size", "data_size", "num_classes", "fingerprint"}
SHOWN_TOKENS = 10
USAGE = "usage: x-script diff_meta A B (each an x-prepro data_dir or its meta.hjson)"


def data_dir_of(path: str) -> str:
    folder = io.dirname(path) if path.endswith(".hjson") else path
    if read_meta(folder) is None:
        raise UserError(f"diff_meta: {path} has no meta.hjson: give an x-prepro data_dir (or its meta.hjson)")
    return folder


def read_lines(path: str) -> list[str] | None:
    if not io.exists(path):
        return None
    with io.open(path) as f:
        return f.read().splitlines()


def vocab_tokens(path: str) -> list[str] | None:
    return read_vocab(path) if io.exists(path) else None  # an escaped vocab.txt too (xdpx/data/dictionary.py)


def _show(value: Any) -> str:
    return "(absent)" if value is _ABSENT else repr(value)


_ABSENT = object()


def compare_lists(name: str, a: list[str] | None, b: list[str] | None, what: str) -> list[str]:
    """Lines about two id-ordered lists (vocab.txt, target_map.txt)."""
    if a is None and b is None:
        return []
    if a is None or b is None:
        return [f"{name}: {'(absent)' if a is None else f'{len(a)} {what}'} -> "
                f"{'(absent)' if b is None else f'{len(b)} {what}'}"]
    lines = []
    if len(a) != len(b):
        lines.append(f"{name}: {len(a)} -> {len(b)} {what}")
    set_a, set_b = set(a), set(b)
    only_a, only_b = [t for t in a if t not in set_b], [t for t in b if t not in set_a]
    if only_a:
        lines.append(f"  only in A ({len(only_a)}): {' '.join(only_a[:SHOWN_TOKENS])}"
                     + (" ..." if len(only_a) > SHOWN_TOKENS else ""))
    if only_b:
        lines.append(f"  only in B ({len(only_b)}): {' '.join(only_b[:SHOWN_TOKENS])}"
                     + (" ..." if len(only_b) > SHOWN_TOKENS else ""))
    where_b = {t: i for i, t in enumerate(b)}
    moved = [(t, i, where_b[t]) for i, t in enumerate(a) if t in where_b and where_b[t] != i]
    if moved:
        shown = ", ".join(f"{t!r} {i} -> {j}" for t, i, j in moved[:SHOWN_TOKENS])
        lines.append(f"  other id ({len(moved)}): {shown}" + (" ..." if len(moved) > SHOWN_TOKENS else ""))
    if lines and not lines[0].startswith(name):
        lines.insert(0, f"{name}: {len(a)} {what} on both sides")
    return lines


def differences(dir_a: str, dir_b: str) -> list[str]:
    """The lines diff_meta prints (empty when nothing differs)."""
    meta_a, meta_b = read_meta(dir_a) or {}, read_meta(dir_b) or {}
    lines = []
    if meta_a.get("vocab_size") != meta_b.get("vocab_size"):
        lines.append(f"vocab_size: {meta_a.get('vocab_size')} -> {meta_b.get('vocab_size')}")
    lines += compare_lists("vocab.txt", vocab_tokens(io.join(dir_a, "vocab.txt")),
                           vocab_tokens(io.join(dir_b, "vocab.txt")), "tokens")
    if meta_a.get("num_classes") != meta_b.get("num_classes"):
        lines.append(f"num_classes: {meta_a.get('num_classes')} -> {meta_b.get('num_classes')}")
    lines += compare_lists("target_map.txt", read_lines(io.join(dir_a, "target_map.txt")),
                           read_lines(io.join(dir_b, "target_map.txt")), "labels")
    sizes_a, sizes_b = meta_a.get("data_size") or {}, meta_b.get("data_size") or {}
    for split in sorted(set(sizes_a) | set(sizes_b)):
        if sizes_a.get(split) != sizes_b.get(split):
            lines.append(f"data_size.{split}: {sizes_a.get(split, '(absent)')} -> {sizes_b.get(split, '(absent)')}")
    for key in [k for k in meta_a if k not in OWN_SECTIONS] + [k for k in meta_b if k not in meta_a and
                                                                k not in OWN_SECTIONS]:
        left, right = meta_a.get(key, _ABSENT), meta_b.get(key, _ABSENT)
        if left != right:
            lines.append(f"{key}: {_show(left)} -> {_show(right)}")
    return lines


@script("diff_meta")
def main(argv: list[str]) -> int:
    """What differs between two x-prepro outputs' meta.hjson: vocabulary, target map, sizes, options."""
    if len(argv) != 2:
        raise ConfigError([USAGE])
    dir_a, dir_b = data_dir_of(argv[0]), data_dir_of(argv[1])
    lines = differences(dir_a, dir_b)
    if not lines:
        print(f"no differences between {argv[0]} and {argv[1]}")
        return 0
    print(f"# A = {argv[0]}, B = {argv[1]}")
    for line in lines:
        print(line)
    return 0
