"""Which samples make each update: batching by length, shuffled from (seed, epoch), split over ranks.

An epoch is a list of *update groups* of ``batch_size x update_freq x world_size`` sample indices. Each
rank takes its share of a group and cuts it into micro-batches of ``batch_size``. Because the groups do
not depend on how an update is split, 64x1, 32x2 and 2 ranks x 32 see the same samples in each update,
and auto_ga (halving batch_size, doubling update_freq) keeps the data order. The data position is
(epoch, offset): offset counts the groups of the epoch already done, so a resume lands on the next one.

With ``lazy_load`` each training split (shard) is a unit: groups never cross shards; the shards are read
in order in the first epoch and in a (seed, epoch) order later; only the current shard is open.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from xdpx.runtime.seeding import epoch_rng


def update_groups(sizes: np.ndarray, update_size: int, seed: int, epoch: int,
                  shuffle: bool = True) -> list[np.ndarray]:
    """Sample indices sorted by length (ties in a random order), cut into groups, groups shuffled.

    Similar lengths share a batch (little padding); the order of the groups is new every epoch.
    """
    n = len(sizes)
    if not shuffle:
        order = np.argsort(sizes, kind="stable")
        return [order[i: i + update_size] for i in range(0, n, update_size)]
    rng = epoch_rng(seed, epoch)
    permutation = rng.permutation(n)
    order = permutation[np.argsort(np.asarray(sizes)[permutation], kind="stable")]
    groups = [order[i: i + update_size] for i in range(0, n, update_size)]
    return [groups[i] for i in rng.permutation(len(groups))]


def rank_share(group: np.ndarray, rank: int, world_size: int) -> tuple[np.ndarray, bool]:
    """This rank's samples of an update group; (first sample, True) stands in when the group is too short
    for every rank to get one (its loss then counts zero, but the rank still joins the gradient sync)."""
    share = group[rank::world_size]
    if len(share) == 0:
        return group[:1], True
    return share, False


def micro_batches(share: np.ndarray, batch_size: int) -> list[np.ndarray]:
    return [share[i: i + batch_size] for i in range(0, len(share), batch_size)]


def updates_per_epoch(split_sizes: list[int], update_size: int, lazy: bool) -> int:
    if lazy:
        return sum(math.ceil(n / update_size) for n in split_sizes)
    return math.ceil(sum(split_sizes) / update_size)


class ConcatSplits:
    """Several opened splits as one dataset (``len``, ``[i]``, ``sizes``); sample ids stay the splits'."""

    def __init__(self, datasets: list[Any]) -> None:
        self.datasets = datasets
        self.offsets = np.cumsum([0] + [len(d) for d in datasets])
        self._sizes: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def __getitem__(self, i: int) -> dict[str, Any]:
        k = int(np.searchsorted(self.offsets, i, side="right") - 1)
        return self.datasets[k][int(i - self.offsets[k])]

    @property
    def sizes(self) -> np.ndarray:
        if self._sizes is None:
            self._sizes = np.concatenate([np.asarray(d.sizes) for d in self.datasets])
        return self._sizes


class TrainBatches:
    """The update groups of each epoch over the training split(s), resumable at (epoch, offset)."""

    def __init__(self, open_split: Callable[[str], Any], splits: list[str], lazy: bool, seed: int,
                 wait: Callable[[str], None] | None = None) -> None:
        self.open_split, self.splits, self.lazy, self.seed = open_split, list(splits), lazy, seed
        self.wait = wait  # lazy_load: returns once a shard still being written is ready (xdpx/train/shards.py)
        self._whole: Any = None

    def units(self, epoch: int) -> list[str] | None:
        """The shard order of an epoch (lazy_load), or None when all splits form one dataset."""
        if not self.lazy:
            return None
        if epoch <= 1:
            return list(self.splits)
        return [self.splits[i] for i in epoch_rng(self.seed, epoch, salt=1).permutation(len(self.splits))]

    def epoch(self, epoch: int, update_size: int, start: int = 0) -> Iterator[tuple[Any, np.ndarray]]:
        """(dataset, sample indices) for each update group of ``epoch`` from group ``start`` on."""
        units = self.units(epoch)
        if units is None:
            if self._whole is None:
                datasets = [self.open_split(s) for s in self.splits]
                self._whole = datasets[0] if len(datasets) == 1 else ConcatSplits(datasets)
            groups = update_groups(self._whole.sizes, update_size, self.seed, epoch)
            for group in groups[start:]:
                yield self._whole, group
            return
        done = 0
        for unit in units:
            if self.wait is not None:
                self.wait(unit)
            dataset = self.open_split(unit)
            count = math.ceil(len(dataset) / update_size)
            if done + count <= start:
                done += count
                continue
            groups = update_groups(dataset.sizes, update_size, self.seed, epoch)
            for group in groups[max(0, start - done):]:
                yield dataset, group
            done += count
            del dataset  # one shard open at a time
