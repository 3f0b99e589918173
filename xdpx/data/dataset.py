"""A binary split opened for training: ``open_split(data_dir, split)``; see docs/architecture.md."""

from __future__ import annotations

from typing import Any

from xdpx import io
from xdpx.data.indexed import IndexedArray, load_scalars


def split_fields(data_dir: str, split: str) -> tuple[list[str], list[str]]:
    """The token fields (.idx/.bin pairs) and scalar fields (.npy) of a split, sorted."""
    names = io.listdir(data_dir)
    token = sorted(n[len(split) + 1: -4] for n in names if n.startswith(split + ".") and n.endswith(".idx")
                   and "." not in n[len(split) + 1: -4])
    scalar = sorted(n[len(split) + 1: -4] for n in names if n.startswith(split + ".") and n.endswith(".npy")
                    and "." not in n[len(split) + 1: -4])
    return token, scalar


class Dataset:
    """A memory-mapped split: ``len(ds)``, ``ds[i]`` -> {'id', token fields..., 'target'?}, ``ds.sizes``."""

    def __init__(self, data_dir: str, split: str) -> None:
        token_fields, scalar_fields = split_fields(data_dir, split)
        if not token_fields:
            available = sorted({n.split(".")[0] for n in io.listdir(data_dir) if n.endswith(".idx")})
            raise FileNotFoundError(f"no split {split!r} in {data_dir} (available: {', '.join(available) or 'none'})")
        self.data_dir, self.split = data_dir, split
        self.fields = {name: IndexedArray(io.join(data_dir, f"{split}.{name}")) for name in token_fields}
        self.scalars = {name: load_scalars(io.join(data_dir, f"{split}.{name}.npy")) for name in scalar_fields}
        lengths = {len(a) for a in self.fields.values()} | {len(a) for a in self.scalars.values()}
        if len(lengths) != 1:
            raise ValueError(f"split {split!r} in {data_dir}: fields disagree on the number of samples")
        self._len = lengths.pop()
        self._sizes: Any = None

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, i: int) -> dict[str, Any]:
        if not -self._len <= i < self._len:
            raise IndexError(f"sample {i} out of range for split {self.split!r} of {self._len}")
        i = i % self._len
        sample: dict[str, Any] = {name: array[i] for name, array in self.fields.items()}
        for name, array in self.scalars.items():
            sample[name] = array[i].item() if array.ndim == 1 else array[i]  # a row: multilabel multi-hot
        sample.setdefault("id", i)
        return sample

    @property
    def sizes(self) -> Any:
        """Tokens per sample (all token fields together), for batching by length."""
        if self._sizes is None:
            arrays = [a.sizes for a in self.fields.values()]
            self._sizes = sum(arrays[1:], arrays[0])
        return self._sizes


def open_split(data_dir: str, split: str) -> Dataset:
    """Open ``split`` (train, dev, train3, ...) of an x-prepro ``data_dir``; reads no token data."""
    return Dataset(data_dir, split)
