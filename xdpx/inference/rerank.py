"""Cross-encoder rerankers: a pair classifier run (model ``bert_pair`` or any encoder with the
classification head over two texts) trained on labelled (query, passage) pairs, ``1`` relevant and ``0``
not (x-script rerank_pairs writes them from a triplet file of x-script mine_negatives), scores each
(query, candidate) pair of a first stage and orders the candidates again.

The score of a pair is the log-odds of its label ``1``: ``logit[1] - logsumexp(other logits)`` (two
classes: ``logit[1] - logit[0]``), in float64; a regression run's score is its output. It orders as the
probability of ``1`` does, without the probability's saturation at 1.0 in float32. Ties keep the first
stage's order (a stable sort).

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


def rerank_lists(reranker: Reranker, queries: Sequence[str], candidates: Sequence[Sequence[str]],
                 progress: str | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per query, (order, scores): ``order`` the positions of its candidates (texts, first-stage order) best
    first by the reranker, ``scores`` the reranker's score of each candidate in the first-stage order. All
    pairs go through the model in one batched pass."""
    pairs = [(q, text) for q, texts in zip(queries, candidates) for text in texts]
    scores = reranker.score(pairs, progress)
    out, start = [], 0
    for texts in candidates:
        mine = scores[start: start + len(texts)]
        out.append((rerank_order(mine), mine))
        start += len(texts)
    return out


FIRST_STAGE = "first_stage."  # the columns of the first stage's metrics beside the reranked ones


def evaluate_reranking(reranker: Reranker, first_stage: Any, data: Any, ks: list[int], rerank_k: int,
                       progress: str = "x-eval rerank") -> dict[str, float]:
    """Both stages' corpus metrics on a BEIR set (xdpx/data/beir.py): the bi-encoder ``first_stage`` (a
    LoadedModel) ranks the whole corpus by the dot product of its embeddings, as x-eval of that run does
    (``first_stage.ndcg_at_10`` ...), then the reranker orders each query's top ``rerank_k`` again, the
    documents below them keeping their first-stage places (``ndcg_at_10`` ...)."""
    doc_ids, query_ids = list(data.corpus), list(data.queries)
    texts = {doc: f"{title} {text}".strip() for doc, (title, text) in data.corpus.items()}
    documents = embed(first_stage, list(texts.values()), progress=f"{progress} corpus").astype(np.float64)
    queries = embed(first_stage, list(data.queries.values()), progress=f"{progress} queries").astype(np.float64)
    depth = max(max(ks), rerank_k)
    first: dict[str, list[str]] = {}
    for start in range(0, len(queries), 256):  # memory: [256, documents] scores at a time
        first.update(zip(query_ids[start: start + 256], top_k(queries[start: start + 256] @ documents.T, doc_ids,
                                                              depth)))
    candidates = [first[q][:rerank_k] for q in query_ids]
    orders = rerank_lists(reranker, list(data.queries.values()), [[texts[d] for d in c] for c in candidates],
                          progress=f"{progress} pairs")
    reranked = {q: [c[i] for i in order] + first[q][rerank_k:]
                for q, c, (order, _scores) in zip(query_ids, candidates, orders)}
    out = {FIRST_STAGE + name: value for name, value in ir_metrics(first, data.qrels, ks).items()}
    out.update(ir_metrics(reranked, data.qrels, ks))
    return out
