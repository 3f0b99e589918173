"""The on-disk format of a split: memory-mapped, one file pair per field (invariant 6 of docs/architecture.md).

Token fields (``input_ids``, ``tokens``, ...): ``{split}.{field}.bin`` holds every sample's ids back to
back in the narrowest integer type that fits the vocabulary; ``{split}.{field}.idx`` holds a header
(magic ``XDPXIDX1``, dtype code, sample count) and the int64 offsets (count + 1) into the .bin file.
Per-sample scalars (``target``, ``id``) are plain ``{split}.{field}.npy`` arrays.

Writers stream: memory stays bounded whatever the number of samples. Readers open with np.memmap, so
opening a split reads no token data.
"""

from __future__ import annotations

import struct
from typing import Any

from xdpx import io

MAGIC = b"XDPXIDX1"
HEADER = struct.Struct("<8sB7xQ")  # magic, dtype code, padding, sample count
DTYPE_CODES = {1: "uint8", 2: "uint16", 3: "int32", 4: "int64", 5: "float32"}
CODE_OF = {name: code for code, name in DTYPE_CODES.items()}
COPY_CHUNK = 1 << 22


def narrowest_dtype(vocab_size: int) -> str:
    """The smallest unsigned type holding ids 0..vocab_size-1 (int32 beyond 65,536 words)."""
    return "uint8" if vocab_size <= 1 << 8 else "uint16" if vocab_size <= 1 << 16 else "int32"


def _append_file(dst: Any, src_path: str) -> None:
    with io.open(src_path, "rb") as src:
        while chunk := src.read(COPY_CHUNK):
            dst.write(chunk)
    io.remove(src_path)


class IndexedWriter:
    """Streams variable-length id sequences to ``prefix.bin`` / ``prefix.idx`` (local staging paths)."""

    def __init__(self, prefix: str, dtype: str) -> None:
        import numpy as np  # lazy: x-prepro --dry starts without numpy

        self.prefix, self.dtype = prefix, np.dtype(dtype)
        self.bin = io.open(prefix + ".bin", "wb")
        self.offsets = io.open(prefix + ".idx.part", "wb")
        self.position, self.count = 0, 0
        self.offsets.write(np.zeros(1, dtype=np.int64).tobytes())

    def add_many(self, flat: Any, lengths: Any) -> None:
        import numpy as np  # lazy: x-prepro --dry starts without numpy

        flat = np.asarray(flat)
        if len(flat) and self.dtype.kind in "iu" and (flat.min() < 0 or flat.max() > np.iinfo(self.dtype).max):
            raise ValueError(f"ids out of range for {self.dtype}")
        self.bin.write(flat.astype(self.dtype, copy=False).tobytes())
        ends = self.position + np.cumsum(np.asarray(lengths, dtype=np.int64))
        self.offsets.write(ends.tobytes())
        self.position = int(ends[-1]) if len(ends) else self.position
        self.count += len(lengths)

    def close(self) -> None:
        self.bin.close()
        self.offsets.close()
        with io.open(self.prefix + ".idx", "wb") as f:
            f.write(HEADER.pack(MAGIC, CODE_OF[self.dtype.name], self.count))
            _append_file(f, self.prefix + ".idx.part")


class ScalarWriter:
    """Streams one number per sample to ``prefix.npy`` (with ``width``: one row of that many numbers, e.g.
    the multi-hot targets of target_type multilabel, an ``[N, width]`` array)."""

    def __init__(self, prefix: str, dtype: str, width: int | None = None) -> None:
        import numpy as np  # lazy: x-prepro --dry starts without numpy

        self.prefix, self.dtype, self.count, self.width = prefix, np.dtype(dtype), 0, width
        self.part = io.open(prefix + ".npy.part", "wb")

    def add_many(self, values: Any) -> None:
        import numpy as np  # lazy: x-prepro --dry starts without numpy

        values = np.asarray(values, dtype=self.dtype)
        self.part.write(values.tobytes())
        self.count += len(values)

    def close(self) -> None:
        import numpy as np  # lazy: x-prepro --dry starts without numpy

        self.part.close()
        with io.open(self.prefix + ".npy", "wb") as f:
            np.lib.format.write_array_header_1_0(f, {"descr": np.lib.format.dtype_to_descr(self.dtype),
                                                     "fortran_order": False,
                                                     "shape": (self.count,) if self.width is None
                                                     else (self.count, self.width)})
            _append_file(f, self.prefix + ".npy.part")


class IndexedArray:
    """Read side of :class:`IndexedWriter`: ``len()``, ``arr[i]`` (a numpy view), ``sizes``."""

    def __init__(self, prefix: str) -> None:
        import numpy as np  # lazy: x-prepro --dry starts without numpy

        idx_path = _local(prefix + ".idx")
        with io.open(idx_path, "rb") as f:
            magic, code, count = HEADER.unpack(f.read(HEADER.size))
        if magic != MAGIC:
            raise ValueError(f"{prefix}.idx is not an XDPX index file (format version mismatch?)")
        self.dtype = np.dtype(DTYPE_CODES[code])
        self.offsets = np.memmap(idx_path, dtype=np.int64, mode="r", offset=HEADER.size, shape=(count + 1,))
        bin_path = _local(prefix + ".bin")
        total = int(self.offsets[-1])
        # np.memmap refuses empty files; an empty split still opens.
        self.data = np.memmap(bin_path, dtype=self.dtype, mode="r") if total else np.zeros(0, self.dtype)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> Any:
        return self.data[self.offsets[i]: self.offsets[i + 1]]

    @property
    def sizes(self) -> Any:
        import numpy as np  # lazy: x-prepro --dry starts without numpy

        return np.diff(self.offsets)


def load_scalars(path: str) -> Any:
    import numpy as np  # lazy: x-prepro --dry starts without numpy

    return np.load(_local(path), mmap_mode="r")


def _local(path: str) -> str:
    """Memory-mapping needs a local file: remote data_dirs are cached locally (with a freshness check)."""
    return io.cached_path(path) if io.is_remote(path) else io.abspath(path)
