"""``x-script diff_data A B [--show N]``: what differs between two x-prepro outputs' samples.

A and B are data directories. For every split of either side (meta.hjson's data_size) it prints the sample
counts, and how many samples differ when each side's sample i is decoded by its own processor (tokens
as text, and the label): so two outputs with different vocabularies compare by what the samples say, not
by ids. Then the first N (default 5) differing samples of each split, ``A`` and ``B`` lines one under the
other (``(none)`` where a side has fewer samples). Nothing differs: says so.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from xdpx.command import script
from xdpx.config.errors import ConfigError
from xdpx.config.options import Args
from xdpx.data.composition import build_processor
from xdpx.data.dataset import open_split
from xdpx.data.meta import read_meta
from xdpx.errors import UserError
from xdpx.scripts.result_tables import number_flag, split_flags

USAGE = "usage: x-script diff_data A B [--show N] (A, B: x-prepro data_dirs)"


class DecodedSplits:
    """One data directory's splits, decoded sample by sample with its own processor."""

    def __init__(self, data_dir: str) -> None:
        meta = read_meta(data_dir)
        if meta is None:
            raise UserError(f"diff_data: {data_dir} has no meta.hjson: give an x-prepro data_dir")
        self.data_dir, self.sizes = data_dir, dict(meta.get("data_size") or {})
        args = Args({**meta, "data_dir": data_dir}, {}, set(), {})
        self.processor = build_processor(args, data_dir=data_dir)

    def samples(self, split: str) -> Iterator[str]:
        if split not in self.sizes:
            return
        dataset = open_split(self.data_dir, split)
        for i in range(len(dataset)):
            yield self.describe(dataset[i])

    def describe(self, sample: dict[str, Any]) -> str:
        label = f"  -> {self.processor.decode_target(sample['target'])}" if "target" in sample else ""
        return f"{self.processor.decode(sample)}{label}"


def split_differences(a: DecodedSplits, b: DecodedSplits, split: str,
                      show: int) -> tuple[int, list[tuple[int, str | None, str | None]]]:
    """``(number of differing positions, the first ``show`` of them as (index, A's sample, B's sample))``."""
    left, right = a.samples(split), b.samples(split)
    differing, shown, index = 0, [], 0
    while True:
        x, y = next(left, None), next(right, None)
        if x is None and y is None:
            return differing, shown
        if x != y:
            differing += 1
            if len(shown) < show:
                shown.append((index, x, y))
        index += 1


def report(dir_a: str, dir_b: str, show: int) -> tuple[list[str], int]:
    """The printed lines and the number of differing samples over all splits."""
    a, b = DecodedSplits(dir_a), DecodedSplits(dir_b)
    lines = [f"# A = {dir_a}, B = {dir_b}", "split\tA\tB\tdiffering"]
    details: list[str] = []
    total = 0
    for split in sorted(set(a.sizes) | set(b.sizes)):
        differing, shown = split_differences(a, b, split, show)
        total += differing
        lines.append(f"{split}\t{a.sizes.get(split, '(absent)')}\t{b.sizes.get(split, '(absent)')}\t{differing}")
        if shown:
            details.append(f"## {split}: the first {len(shown)} of {differing} differing samples")
            for index, x, y in shown:
                details += [f"[{index}] A: {x if x is not None else '(none)'}",
                            f"[{index}] B: {y if y is not None else '(none)'}"]
    return lines + details, total


@script("diff_data")
def main(argv: list[str]) -> int:
    """Per-split sample counts of two x-prepro outputs and their first differing samples, decoded."""
    positional, flags = split_flags(argv, {"show": "5"}, USAGE)
    if len(positional) != 2:
        raise ConfigError([USAGE])
    show = int(number_flag(flags, "show", USAGE, low=-1))
    lines, total = report(positional[0], positional[1], show)
    for line in lines:
        print(line)
    print("no differences" if total == 0 else f"# {total} differing samples")
    return 0
