"""A nearest-neighbour index of embeddings for x-script build_index / search and x-serve --corpus: FAISS (faiss-cpu, the
``faiss`` extra) when it is installed, else a numpy matrix with the same interface and the same answers
(exact inner-product search either way: the bi-encoders' embeddings are L2-normalised, so the inner
product is the cosine similarity).

Approximate (HNSW, IVF) and quantized (int8, binary) FAISS indexes are in xdpx/runtime/index_kinds.py.
An index folder holds ``index.json`` (what built it: run, checkpoint, backend, index kind, quantization and
their parameters, count, dim, and for an index other than exact float32 its recall@10 against the exact search),
``vectors.faiss`` (FAISS) or ``vectors.npy`` (numpy), and ``texts.tsv`` (``id<TAB>text``, TSV-escaped).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from xdpx import io
from xdpx.errors import UserError
from xdpx.io.tsv_cells import escape, unescape
from xdpx.runtime.index_kinds import KindIndex, damaged, is_plain
from xdpx.utils.optional import installed, require

INDEX_FILE, TEXTS_FILE = "index.json", "texts.tsv"
BACKENDS = ("auto", "faiss", "numpy")


class NumpyIndex:
    """Exact inner-product search over a float32 matrix (FAISS's IndexFlatIP, without FAISS)."""

    file_name = "vectors.npy"
    backend = "numpy"

    def __init__(self, dim: int) -> None:
        self.dim, self.vectors = dim, np.zeros((0, dim), dtype=np.float32)

    def add(self, vectors: np.ndarray) -> None:
        self.vectors = np.concatenate([self.vectors, np.asarray(vectors, dtype=np.float32)])

    def __len__(self) -> int:
        return len(self.vectors)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, ids), each ``[Q, min(k, len)]``, best first; equal scores by lower id, as FAISS."""
        scores = np.asarray(queries, dtype=np.float32) @ self.vectors.T
        k = min(k, len(self.vectors))
        order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        return np.take_along_axis(scores, order, axis=1), order.astype(np.int64)

    def save(self, folder: str) -> None:
        with io.open(io.join(folder, self.file_name), "wb") as f:
            np.save(f, self.vectors)

    @classmethod
    def load(cls, folder: str, dim: int) -> NumpyIndex:
        index = cls(dim)
        path = io.join(folder, cls.file_name)
        with io.open(path, "rb") as f:
            try:
                vectors = np.load(f, allow_pickle=False)
            except (ValueError, EOFError, OSError) as e:  # numpy's words for a cut or overwritten file
                raise damaged(path, str(e).split(". ")[0].strip() or type(e).__name__) from None
        if vectors.ndim != 2 or vectors.dtype != np.float32:
            raise damaged(path, f"a {vectors.dtype} array of shape {vectors.shape}, not float32 vectors")
        index.vectors, index.dim = vectors, int(vectors.shape[1])
        return index


class FaissIndex:
    """faiss.IndexFlatIP: exact inner-product search, FAISS's kernels."""

    file_name = "vectors.faiss"
    backend = "faiss"

    def __init__(self, dim: int, index: Any = None) -> None:
        self.faiss = require("faiss", "x-script build_index --backend faiss")
        self.dim, self.index = dim, index if index is not None else self.faiss.IndexFlatIP(dim)

    def add(self, vectors: np.ndarray) -> None:
        self.index.add(np.ascontiguousarray(vectors, dtype=np.float32))

    def __len__(self) -> int:
        return int(self.index.ntotal)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        k = min(k, len(self))
        scores, ids = self.index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
        return scores, ids.astype(np.int64)

    def save(self, folder: str) -> None:
        # serialize_index -> bytes: written through xdpx.io, so a remote folder works like a local one
        with io.open(io.join(folder, self.file_name), "wb") as f:
            f.write(self.faiss.serialize_index(self.index).tobytes())

    @classmethod
    def load(cls, folder: str, dim: int) -> FaissIndex:
        faiss = require("faiss", "x-script search of a FAISS index")
        path = io.join(folder, cls.file_name)
        with io.open(path, "rb") as f:
            data = np.frombuffer(f.read(), dtype=np.uint8)
        try:
            index = faiss.deserialize_index(data)
        except RuntimeError:  # FAISS reads past the end of a cut file; its text is a C++ source location
            raise damaged(path, "FAISS cannot read it") from None
        return cls(int(index.d), index)


def new_index(backend: str, dim: int) -> NumpyIndex | FaissIndex:
    """``auto``: FAISS when installed, else numpy; ``faiss`` fails with the install line when it is not."""
    if backend == "numpy" or (backend == "auto" and not installed("faiss")):
        return NumpyIndex(dim)
    return FaissIndex(dim)


@dataclass
class StoredIndex:
    """An index folder read back: its facts, the index and the texts."""

    facts: dict[str, Any]
    index: NumpyIndex | FaissIndex | KindIndex
    texts: list[str]


def save_index(folder: str, index: NumpyIndex | FaissIndex | KindIndex, texts: list[str], facts: dict[str, Any]) -> None:
    io.makedirs(folder)
    index.save(folder)
    with io.open(io.join(folder, TEXTS_FILE), "w") as f:
        f.writelines(f"{i}\t{escape(text)}\n" for i, text in enumerate(texts))
    with io.open(io.join(folder, INDEX_FILE), "w") as f:  # last: a folder with index.json is complete
        kind = index.facts() if isinstance(index, KindIndex) else {"index": "exact", "quantize": "none"}
        f.write(json.dumps({**facts, **kind, "backend": index.backend, "count": len(index), "dim": index.dim},
                           indent=1, ensure_ascii=False) + "\n")


def load_index(folder: str) -> StoredIndex:
    path = io.join(folder, INDEX_FILE)
    if not io.exists(path):
        raise UserError(f"{folder} is not an index folder (no {INDEX_FILE}): build one with x-script build_index")
    with io.open(path) as f:
        facts = json.loads(f.read())
    if not is_plain(facts):  # approximate or quantized (xdpx/runtime/index_kinds.py)
        index: NumpyIndex | FaissIndex | KindIndex = KindIndex.load(folder, facts)
    else:
        index = (FaissIndex if facts.get("backend") == "faiss" else NumpyIndex).load(folder, int(facts["dim"]))
    with io.open(io.join(folder, TEXTS_FILE)) as f:
        texts = [unescape(line.rstrip("\n").split("\t", 1)[1]) for line in f if line.strip()]
    if len(texts) != len(index) or len(index) != facts.get("count", len(index)) or index.dim != int(facts["dim"]):
        raise UserError(f"{folder}: {len(index)} vectors of dim {index.dim} and {len(texts)} texts, but {INDEX_FILE} "
                        f"says {facts.get('count')} of dim {facts['dim']}: the folder was changed after x-script "
                        "build_index wrote it; build it again")
    return StoredIndex(facts, index, texts)
