"""Cross-encoder rerankers: a pair classifier run (model ``bert_pair`` or any encoder with the
classification head over two texts) trained on labelled (query, passage) pairs, ``1`` relevant and ``0``
not (x-script rerank_pairs writes them from a triplet file of x-script mine_negatives), scores each
(query, candidate) pair of a first stage and orders the candidates again.

The score of a pair is the log-odds of its label ``1``: ``logit[1] - logsumexp(other logits)`` (two
classes: ``logit[1] - logit[0]``), in float64; a regression run's score is its output. It orders as the
probability of ``1`` does, without the probability's saturation at 1.0 in float32. Ties keep the first
stage's order (a stable sort).

``rerank_weight`` w < 1 orders by a convex combination of the two stages instead (Bruch et al. 2023, "An
Analysis of Fusion Functions for Hybrid Retrieval"): over a query's reranked candidates, ``w * minmax(reranker
scores) + (1 - w) * minmax(first-stage cosines)`` (:func:`fuse_scores`); w = 1 (the default) is the reranker's
order alone, w = 0 the first stage's.

Used by x-eval (a cross-encoder on a BEIR folder reranks a bi-encoder's top ``rerank_k``: both stages'
metrics), x-pred (``rerank``, ``rerank_k``) and x-serve (``--reranker``, POST /search ``"rerank": k``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xdpx import io
from xdpx.command import COMMON_OPTIONS
from xdpx.config.options import Args, resolve
from xdpx.config.writers import ARGS_FILE, read_args
from xdpx.errors import UserError
from xdpx.inference.loading import load_model
from xdpx.inference.options import LOAD_OPTIONS
from xdpx.inference.rerank_options import reranker_problem
from xdpx.metrics.ir import ir_metrics, top_k
from xdpx.runtime.corpus import embed
from xdpx.runtime.scoring import predict_logits

RELEVANT = "1"  # the label of a relevant pair in the reranker's training data (rerank_pairs writes 1 / 0)


def load_run(save_dir: str, checkpoint: str | None = None, batch_size: int | None = None) -> Any:
    """The LoadedModel of a run directory on the CPU (its best checkpoint unless ``checkpoint`` says)."""
    config = {"save_dir": save_dir, "checkpoint": checkpoint, "batch_size": batch_size, "cuda": False}
    args = resolve({k: v for k, v in config.items() if v is not None}, COMMON_OPTIONS + LOAD_OPTIONS, "rerank",
                   origin="rerank")
    return load_model(args, say=lambda m: print(m, file=sys.stderr))


@dataclass
class Reranker:
    """A loaded cross-encoder run and the column of its relevant label."""

    loaded: Any
    column: int | None  # the logit of label 1 (None: a regression run, the score is the output)
    source: str

    @classmethod
    def load(cls, save_dir: str, checkpoint: str | None = None, batch_size: int | None = None) -> Reranker:
        if not io.exists(io.join(save_dir, ARGS_FILE)):
            raise UserError(f"{save_dir}: no {ARGS_FILE}: the reranker is an x-train run directory")
        problem = reranker_problem(Args(read_args(io.join(save_dir, ARGS_FILE)), {}, set(), {}), save_dir)
        if problem:
            raise UserError(problem)
        loaded = load_run(save_dir, checkpoint, batch_size)
        return cls(loaded, relevant_column(loaded, save_dir), save_dir)

    def score(self, pairs: Sequence[tuple[str, str]], progress: str | None = None) -> np.ndarray:
        """The float64 score of each (query, passage) pair (see the module docstring)."""
        loaded = self.loaded
        samples = []
        for i, (query, passage) in enumerate(pairs):
            sample = loaded.processor.encode([query, passage])
            sample["id"] = i
            samples.append(sample)
        if not samples:
            return np.zeros(0)
        logits = predict_logits(loaded.task, loaded.model, loaded.processor, samples, loaded.batch_size,
                                loaded.autocast, loaded.to_device, progress=progress).numpy().astype(np.float64)
        return log_odds(logits.reshape(len(samples), -1), self.column)


def relevant_column(loaded: Any, where: str) -> int | None:
    """The logit column of label 1 (None for a regression run); UserError when the run has no such label."""
    if loaded.regression:
        return None
    labels = list(loaded.processor.target_map.labels) if loaded.processor.target_map is not None else []
    if RELEVANT not in labels:
        raise UserError(f"{where}: the run's labels are {labels}: a reranker is trained on pairs labelled 1 "
                        "(relevant) and 0 (x-script rerank_pairs writes them)")
    return labels.index(RELEVANT)


def log_odds(logits: np.ndarray, column: int | None) -> np.ndarray:
    """``logit[column] - logsumexp(the other logits)`` per row (the regression output when column is None)."""
    if column is None:
        return logits[:, 0].copy()
    others = np.delete(logits, column, axis=1)
    top = others.max(axis=1, keepdims=True)
    return logits[:, column] - (top[:, 0] + np.log(np.exp(others - top).sum(axis=1)))


def rerank_order(scores: np.ndarray) -> np.ndarray:
    """The candidates' positions by descending score; equal scores keep the first stage's order."""
    return np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")


def minmax(values: np.ndarray) -> np.ndarray:
    """``(x - min) / (max - min)`` in float64; all zeros for a constant (or one-value, or empty) list."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return values.copy()
    low, high = values.min(), values.max()
    return np.zeros_like(values) if high == low else (values - low) / (high - low)


def fuse_scores(rerank: np.ndarray, first: np.ndarray, weight: float) -> np.ndarray:
    """The convex combination of one query's candidates: ``weight * minmax(rerank) + (1 - weight) *
    minmax(first)`` (the reranker's scores and the first stage's cosines, both in first-stage order), float64.
    Each stage is normalised over the candidates, so neither's scale (log-odds, cosines) outweighs the other."""
    rerank, first = np.asarray(rerank, dtype=np.float64), np.asarray(first, dtype=np.float64)
    if rerank.shape != first.shape:
        raise ValueError(f"{rerank.shape[0]} reranker scores for {first.shape[0]} first-stage scores")
    return weight * minmax(rerank) + (1.0 - weight) * minmax(first)


def fused_order(rerank: np.ndarray, first: np.ndarray | None, weight: float = 1.0) -> np.ndarray:
    """The candidates' positions best first: by the reranker's score alone when ``weight`` is 1 (exactly
    :func:`rerank_order`: the normalisation could round two close scores into a tie), else by
    :func:`fuse_scores`; ties keep the first stage's order."""
    if weight == 1.0 or first is None:
        return rerank_order(rerank)
    return rerank_order(fuse_scores(rerank, first, weight))


def rerank_lists(reranker: Reranker, queries: Sequence[str], candidates: Sequence[Sequence[str]],
                 progress: str | None = None, first_scores: Sequence[Sequence[float]] | None = None,
                 weight: float = 1.0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per query, (order, scores): ``order`` the positions of its candidates (texts, first-stage order) best
    first by the reranker, or with ``weight`` < 1 by its fusion with ``first_scores`` (each query's
    first-stage scores of its candidates, :func:`fuse_scores`), ``scores`` the reranker's score of each
    candidate in the first-stage order. All pairs go through the model in one batched pass."""
    if weight != 1.0 and first_scores is None:
        raise ValueError("a rerank weight below 1 fuses the first stage's scores: pass first_scores")
    pairs = [(q, text) for q, texts in zip(queries, candidates) for text in texts]
    scores = reranker.score(pairs, progress)
    out, start = [], 0
    for number, texts in enumerate(candidates):
        mine = scores[start: start + len(texts)]
        out.append((fused_order(mine, None if first_scores is None else first_scores[number], weight), mine))
        start += len(texts)
    return out


FIRST_STAGE = "first_stage."  # the columns of the first stage's metrics beside the reranked ones


def evaluate_reranking(reranker: Reranker, first_stage: Any, data: Any, ks: list[int], rerank_k: int,
                       progress: str = "x-eval rerank", weight: float = 1.0) -> dict[str, float]:
    """Both stages' corpus metrics on a BEIR set (xdpx/data/beir.py): the bi-encoder ``first_stage`` (a
    LoadedModel) ranks the whole corpus by the dot product of its embeddings, as x-eval of that run does
    (``first_stage.ndcg_at_10`` ...), then the reranker orders each query's top ``rerank_k`` again (with
    ``weight`` < 1, by its fusion with those dot products: :func:`fuse_scores`), the documents below them
    keeping their first-stage places (``ndcg_at_10`` ...)."""
    doc_ids, query_ids = list(data.corpus), list(data.queries)
    texts = {doc: f"{title} {text}".strip() for doc, (title, text) in data.corpus.items()}
    documents = embed(first_stage, list(texts.values()), progress=f"{progress} corpus").astype(np.float64)
    queries = embed(first_stage, list(data.queries.values()), progress=f"{progress} queries").astype(np.float64)
    depth = max(max(ks), rerank_k)
    place = {doc: i for i, doc in enumerate(doc_ids)}
    first: dict[str, list[str]] = {}
    cosines: dict[str, list[float]] = {}  # each query's scores of its top rerank_k (what fusion weighs)
    for start in range(0, len(queries), 256):  # memory: [256, documents] scores at a time
        block = queries[start: start + 256] @ documents.T
        for q, row, ranked in zip(query_ids[start: start + 256], block, top_k(block, doc_ids, depth)):
            first[q] = ranked
            cosines[q] = [float(row[place[d]]) for d in ranked[:rerank_k]]
    candidates = [first[q][:rerank_k] for q in query_ids]
    orders = rerank_lists(reranker, list(data.queries.values()), [[texts[d] for d in c] for c in candidates],
                          progress=f"{progress} pairs", first_scores=[cosines[q] for q in query_ids],
                          weight=weight)
    reranked = {q: [c[i] for i in order] + first[q][rerank_k:]
                for q, c, (order, _scores) in zip(query_ids, candidates, orders)}
    out = {FIRST_STAGE + name: value for name, value in ir_metrics(first, data.qrels, ks).items()}
    out.update(ir_metrics(reranked, data.qrels, ks))
    return out
