"""Retrieve, then rerank: a bi-encoder run embeds a corpus of texts (one a line, its id the line number
minus 1, as x-script build_index numbers them), each query ranks the whole corpus by the dot product of the
normalised embeddings (the cosine; exact search in float64; or the search of an index folder that x-script
build_index wrote with the same run: x-serve --corpus INDEX_FOLDER), and with a cross-encoder reranker
(xdpx/inference/rerank.py) the query's first ``rerank`` texts are ordered again by the reranker's score.

A hit is ``{"rank", "id", "text", "score"}`` (score: the bi-encoder's cosine); a reranked hit adds
``rerank_score`` (the reranker's log-odds of relevance) and ``first_stage_rank`` (its rank before). Equal
cosines are ordered by id; equal reranker scores keep the first stage's order. With a ``rerank_weight`` below
1 the reranked hits are ordered by the fusion of the two stages' scores (xdpx/inference/rerank.py
fuse_scores); the hits keep both scores. x-pred (``search_corpus``,
``rerank``) and x-serve (``--corpus``, ``--reranker``, POST /search) answer through :class:`Retriever`.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from xdpx import io
from xdpx.config.errors import ConfigError
from xdpx.inference.rerank import Reranker, rerank_lists
from xdpx.runtime.corpus import embed


def read_lines(path: str, what: str) -> list[str]:
    """The texts of ``path``: one a line, the first tab-separated column when a line has tabs (so a
    training file of query<TAB>positive gives its queries). A blank line before more text is refused (it
    would shift the ids after it); ConfigError naming file and line."""
    if not io.exists(path):
        raise ConfigError(f"{path} does not exist: give a file of {what}, one per line")
    texts: list[str] = []
    blank = None
    with io.open(path) as f:
        for number, line in enumerate(f, start=1):
            text = line.rstrip("\r\n").split("\t")[0].strip()
            if not text:
                blank = blank or number
                continue
            if blank is not None:
                raise ConfigError(f"{path}:{blank}: an empty line (or first column) before more {what}: the id of "
                                  "a text is its line number minus 1; remove the line")
            texts.append(text)
    if not texts:
        raise ConfigError(f"{path}: no text in it (an empty file): give {what}, one per line")
    return texts


class Retriever:
    """A corpus embedded by a bi-encoder (``loaded``: its LoadedModel) and an optional reranker."""

    def __init__(self, loaded: Any, texts: list[str], reranker: Reranker | None = None, index: Any = None,
                 rerank_weight: float = 1.0) -> None:
        """``index``: an index of ``texts`` built with the same run (x-script build_index, read back by
        xdpx/runtime/vector_index.py), searched instead of embedding the texts now. ``rerank_weight``: the
        reranker's share of the reranked order (1: its order alone; below 1 fused with the cosines)."""
        self.loaded, self.texts, self.reranker, self.index = loaded, texts, reranker, index
        self.rerank_weight = rerank_weight
        self.vectors = None if index is not None else embed(loaded, texts, progress="corpus").astype(np.float64)
        self.lock = threading.Lock()  # one search at a time: the models' threads already use the cores

    def check(self, k: int, rerank: int | None) -> str | None:
        """Why ``k`` / ``rerank`` cannot be answered (None when they can)."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            return f"k must be an integer >= 1, got {k!r}"
        if rerank is None:
            return None
        if self.reranker is None:
            return "rerank needs a reranker (x-serve --reranker RUN, x-pred rerank: RUN); none is loaded"
        if isinstance(rerank, bool) or not isinstance(rerank, int) or rerank < k:
            return f"rerank is the number of first-stage texts the reranker orders: an integer >= k ({k}), got {rerank!r}"
        return None

    def _first_stage(self, vectors: np.ndarray, depth: int) -> list[list[tuple[int, float]]]:
        """(id, cosine) of each query's ``depth`` best texts: the index's search when there is one (an IVF
        search may find fewer: its missing ids, -1, are left out), else the exact one (equal scores by id)."""
        if self.index is not None:
            scores, ids = self.index.search(vectors.astype(np.float32), depth)
            return [[(int(i), float(v)) for i, v in zip(row_ids, row) if i >= 0] for row_ids, row in zip(ids, scores)]
        ranked = []
        for row in vectors @ self.vectors.T:
            order = np.lexsort((np.arange(len(row)), -row))[:depth]
            ranked.append([(int(i), float(row[i])) for i in order])
        return ranked

    def search(self, queries: list[str], k: int, rerank: int | None = None) -> list[list[dict[str, Any]]]:
        """The hits of each query: its ``k`` best texts, after reranking its first ``rerank`` when given."""
        problem = self.check(k, rerank)
        if problem:
            raise ConfigError(problem)
        with self.lock:
            vectors = embed(self.loaded, queries, progress="queries").astype(np.float64)
            depth = min(max(k, rerank or 0), len(self.texts))
            ranked = self._first_stage(vectors, depth)
            if rerank is None or self.reranker is None:
                return [[hit(rank, i, score, self.texts[i]) for rank, (i, score) in enumerate(hits[:k], start=1)]
                        for hits in ranked]
            orders = rerank_lists(self.reranker, queries, [[self.texts[i] for i, _ in hits] for hits in ranked],
                                  progress="rerank", first_scores=[[score for _, score in hits] for hits in ranked],
                                  weight=self.rerank_weight)
        out = []
        for hits, (order, scores) in zip(ranked, orders):
            out.append([{**hit(rank, hits[j][0], hits[j][1], self.texts[hits[j][0]]),
                         "rerank_score": float(scores[j]), "first_stage_rank": int(j) + 1}
                        for rank, j in enumerate(order[:k], start=1)])
        return out


def hit(rank: int, i: int, score: float, text: str) -> dict[str, Any]:
    return {"rank": rank, "id": i, "text": text, "score": score}
