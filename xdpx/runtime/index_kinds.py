"""Approximate and quantized FAISS indexes for x-script build_index / search, and their recall against the
exact search.

``--index``: ``exact`` (every vector compared), ``hnsw`` (a graph of the vectors, HNSW: ``M`` links per
vector, ``efSearch`` candidates kept while searching) or ``ivf`` (the vectors split into ``nlist`` clusters
by k-means, ``nprobe`` nearest clusters searched). ``--quantize``: ``none`` (float32), ``int8`` (FAISS's
scalar quantizer QT_8bit: one byte per dimension, each dimension's range learnt from the vectors; the
query stays float) or ``binary`` (one sign bit per dimension, Hamming distance; the score printed is
``1 - 2 * hamming / dim``, the share of agreeing signs mapped to [-1, 1]). Every kind works on the inner
product of the normalised embeddings (the cosine).

The recall of an index (:func:`recall_at_k`) is measured against the exact float32 search with indexed
vectors as the queries: a text the index returns counts when its exact score is at least the exact k-th
best score of the query (so equal scores, e.g. duplicate texts, count whichever of them comes back).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from xdpx import io
from xdpx.errors import UserError
from xdpx.utils.optional import require

KINDS, QUANTIZE = ("exact", "hnsw", "ivf"), ("none", "int8", "binary")
# Defaults measured on the STS-B retrieval texts with MiniLM (docs/benchmarks.md, bench/bench_index.py --sweep):
# M 32, efSearch 64 finds 0.9997 of the exact top 10 (efSearch 32: 0.9993, 16: 0.998; each halving halves the
# query time)
HNSW_M, HNSW_EF_CONSTRUCTION, HNSW_EF_SEARCH = 32, 80, 64
# FAISS wants >= 39 training points per cluster; probe a quarter of the clusters, at least 8 (all when fewer)
IVF_POINTS_PER_LIST, IVF_PROBE_SHARE, IVF_MIN_PROBES = 39, 4, 8


def damaged(path: str, reason: str) -> UserError:
    return UserError(f"{path} is truncated or corrupt ({reason}): build the index again with x-script build_index")


def default_params(kind: str, count: int) -> dict[str, int]:
    """The search parameters of ``kind`` for ``count`` vectors: HNSW's M and efSearch; IVF's nlist (about
    4 sqrt(count), at most count / 39 so that k-means has enough points) and nprobe (a quarter of them, at
    least 8: on 3,810 MiniLM vectors, 97 lists, 1 probe finds 0.63 of the exact top 10, 8 0.92, 25 0.98)."""
    if kind == "hnsw":
        return {"M": HNSW_M, "ef_search": HNSW_EF_SEARCH}
    if kind == "ivf":
        nlist = max(1, min(int(4 * math.sqrt(count)), count // IVF_POINTS_PER_LIST))
        return {"nlist": nlist, "nprobe": max(math.ceil(nlist / IVF_PROBE_SHARE), min(nlist, IVF_MIN_PROBES))}
    return {}


def pack_signs(vectors: np.ndarray) -> np.ndarray:
    """One bit per dimension, set where the value is > 0, packed 8 to a byte (the last byte padded with 0)."""
    return np.ascontiguousarray(np.packbits(np.asarray(vectors) > 0, axis=1))


class KindIndex:
    """A FAISS index of one kind and quantization, with the interface of vector_index's exact indexes."""

    file_name = "vectors.faiss"
    backend = "faiss"

    def __init__(self, dim: int, kind: str, quantize: str, params: dict[str, int], index: Any = None) -> None:
        self.faiss = require("faiss", f"x-script build_index --index {kind} --quantize {quantize}")
        self.dim, self.kind, self.quantize, self.params = dim, kind, quantize, dict(params)
        self.index = index if index is not None else self._new()
        self._set_search_params()

    @property
    def binary(self) -> bool:
        return self.quantize == "binary"

    def _new(self) -> Any:
        faiss = self.faiss
        if self.binary:
            bits = 8 * math.ceil(self.dim / 8)
            desc = {"exact": "BFlat", "hnsw": f"BHNSW{self.params.get('M')}", "ivf": f"BIVF{self.params.get('nlist')}"}
            return faiss.index_binary_factory(bits, desc[self.kind])
        codes = "SQ8" if self.quantize == "int8" else "Flat"
        desc = {"exact": codes, "hnsw": f"HNSW{self.params.get('M')}" + ("_SQ8" if self.quantize == "int8" else ""),
                "ivf": f"IVF{self.params.get('nlist')},{codes}"}
        index = faiss.index_factory(self.dim, desc[self.kind], faiss.METRIC_INNER_PRODUCT)
        if self.kind == "hnsw":
            index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        return index

    def _set_search_params(self) -> None:
        # nprobe is not serialised with an IVF index, efSearch is: set both from index.json on load
        if self.kind == "hnsw":
            self.index.hnsw.efSearch = int(self.params["ef_search"])
        elif self.kind == "ivf":
            ivf = self.index if self.binary else self.faiss.extract_index_ivf(self.index)
            ivf.nprobe = int(self.params["nprobe"])

    def _codes(self, vectors: np.ndarray) -> np.ndarray:
        return pack_signs(vectors) if self.binary else np.ascontiguousarray(vectors, dtype=np.float32)

    def add(self, vectors: np.ndarray) -> None:
        codes = self._codes(vectors)
        if not self.index.is_trained:  # IVF's k-means, int8's ranges: learnt from the indexed vectors
            self.index.train(codes)
        self.index.add(codes)

    def __len__(self) -> int:
        return int(self.index.ntotal)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, ids), ``[Q, min(k, len)]``, best first; an id of -1 (score -inf) where an IVF search
        probed too few clusters to find k."""
        k = min(k, len(self))
        scores, ids = self.index.search(self._codes(queries), k)
        scores = 1 - 2 * scores.astype(np.float32) / self.dim if self.binary else scores
        return np.where(ids < 0, -np.inf, scores).astype(np.float32), ids.astype(np.int64)

    def describe(self) -> str:
        params = ", ".join(f"{name} {value}" for name, value in self.params.items())
        return f"{self.kind}{f' ({params})' if params else ''}, {self.quantize if self.quantize != 'none' else 'float32'}"

    def facts(self) -> dict[str, Any]:
        return {"index": self.kind, "quantize": self.quantize, "params": self.params}

    def save(self, folder: str) -> None:
        serialize = self.faiss.serialize_index_binary if self.binary else self.faiss.serialize_index
        with io.open(io.join(folder, self.file_name), "wb") as f:
            f.write(serialize(self.index).tobytes())

    @classmethod
    def load(cls, folder: str, facts: dict[str, Any]) -> KindIndex:
        faiss = require("faiss", "x-script search of a FAISS index")
        path = io.join(folder, cls.file_name)
        with io.open(path, "rb") as f:
            data = np.frombuffer(f.read(), dtype=np.uint8)
        binary = facts.get("quantize") == "binary"
        try:
            index = (faiss.deserialize_index_binary if binary else faiss.deserialize_index)(data)
        except RuntimeError:  # FAISS reads past the end of a cut file; its text is a C++ source location
            raise damaged(path, "FAISS cannot read it") from None
        return cls(int(facts["dim"]), str(facts["index"]), str(facts["quantize"]), facts.get("params") or {}, index)


def is_plain(facts: dict[str, Any]) -> bool:
    """Whether index.json describes an exact float32 index (vector_index's own classes; older folders too)."""
    return facts.get("index", "exact") == "exact" and facts.get("quantize", "none") == "none"


def recall_at_k(vectors: np.ndarray, index: Any, k: int = 10, sample: int = 1000, seed: int = 0) -> tuple[float, int]:
    """(recall@k of ``index`` against the exact float32 search of ``vectors``, the number of queries): up to
    ``sample`` of the indexed vectors (a fixed random choice) are the queries."""
    vectors = np.asarray(vectors, dtype=np.float32)
    k = min(k, len(vectors))
    rows = np.sort(np.random.default_rng(seed).permutation(len(vectors))[:sample])
    found = 0
    for start in range(0, len(rows), 256):  # memory: [256, count] exact scores at a time
        queries = vectors[rows[start: start + 256]]
        exact = queries @ vectors.T
        kth = np.partition(exact, -k, axis=1)[:, -k]
        _, ids = index.search(queries, k)
        got = np.take_along_axis(exact, np.maximum(ids, 0), axis=1)
        found += int(((got >= kth[:, None]) & (ids >= 0)).sum())
    return found / (len(rows) * k), len(rows)
