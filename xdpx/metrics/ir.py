"""Metrics of retrieval on a corpus (queries, documents, graded relevance judgements), with the
conventions of BEIR, which computes them with pytrec_eval (trec_eval):

- a query's documents are ranked by score, highest first; equal scores are ordered by document id in
  descending string order (trec_eval's order: it re-sorts every run that way, so tied documents sit at
  the same places as there);
- a document is relevant when its grade is >= 1; an unjudged document is not relevant;
- ``ndcg_at_<k>``: sum over the top k of grade / log2(rank + 1) (linear gains, the grade itself),
  divided by the same sum over the judged documents in the ideal order (grades descending), cut at k;
- ``map_at_<k>``: the sum of precision@rank over the relevant documents within the top k, divided by
  the number of relevant documents of the query (all of them, as trec_eval's map_cut);
- ``mrr_at_<k>``: 1 / the rank of the first relevant document within the top k (0 if none);
- ``recall_at_<k>``: relevant documents within the top k / relevant documents of the query;
- ``precision_at_<k>``: relevant documents within the top k / k.

Each is the mean over the judged queries (those the qrels name); a judged query with no relevant document
scores 0 on each (trec_eval's values for it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

IR_METRICS = ("ndcg", "map", "mrr", "recall", "precision")
CORPUS_PREFIX = "corpus."  # x-train's eval_corpus columns: corpus.ndcg_at_10 (its recall_at_10 is not the pool's)


def corpus_metric_names(args: Any) -> set[str]:
    """The valid.log.tsv columns x-train's ``eval_corpus`` adds (full width): the names major_metric may take."""
    if not args.get("eval_corpus"):
        return set()
    return {f"{CORPUS_PREFIX}{m}_at_{k}" for m in IR_METRICS for k in args.get("recall_at") or [1, 10]}


def tie_order(doc_ids: Sequence[str]) -> np.ndarray:
    """Per document, its place among the ids in descending string order (0: the largest id): the key that
    orders equal scores."""
    order = sorted(range(len(doc_ids)), key=lambda i: doc_ids[i], reverse=True)
    places = np.empty(len(doc_ids), dtype=np.int64)
    places[order] = np.arange(len(doc_ids))
    return places


def top_k(scores: np.ndarray, doc_ids: Sequence[str], k: int) -> list[list[str]]:
    """The ids of the k best documents of each query (``scores`` ``[queries, documents]``), best first,
    equal scores by descending id."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2 or scores.shape[1] != len(doc_ids):
        raise ValueError(f"scores must be [queries, {len(doc_ids)} documents], got {list(scores.shape)}")
    places, k = tie_order(doc_ids), min(k, len(doc_ids))
    ranked = []
    for row in scores:
        if k < len(row):  # the candidates: every document scoring at least the k-th best score (ties included)
            threshold = np.partition(row, len(row) - k)[len(row) - k]
            candidates = np.flatnonzero(row >= threshold)
        else:
            candidates = np.arange(len(row))
        best = candidates[np.lexsort((places[candidates], -row[candidates]))][:k]
        ranked.append([doc_ids[i] for i in best])
    return ranked


def query_metrics(ranked: Sequence[str], judged: Mapping[str, int], k: int) -> dict[str, float]:
    """The five metrics at k of one query: ``ranked`` its documents best first, ``judged`` its grades."""
    top = list(ranked[:k])
    grades = [judged.get(doc, 0) for doc in top]
    relevant = [g >= 1 for g in grades]
    num_relevant = sum(1 for g in judged.values() if g >= 1)
    dcg = sum(g / math.log2(rank + 2) for rank, g in enumerate(grades) if g > 0)
    ideal = sorted((g for g in judged.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(rank + 2) for rank, g in enumerate(ideal))
    hits, precisions = 0, 0.0
    for rank, is_relevant in enumerate(relevant, start=1):
        if is_relevant:
            hits += 1
            precisions += hits / rank
    first = next((rank for rank, is_relevant in enumerate(relevant, start=1) if is_relevant), None)
    return {"ndcg": dcg / idcg if idcg > 0 else 0.0,
            "map": precisions / num_relevant if num_relevant else 0.0,
            "mrr": 1.0 / first if first is not None else 0.0,
            "recall": hits / num_relevant if num_relevant else 0.0,
            "precision": hits / k}


def ir_metrics(ranked: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]],
               ks: Sequence[int]) -> dict[str, float]:
    """``<metric>_at_<k>`` for each metric and k, averaged over the queries of ``qrels``; ``ranked`` holds
    each query's documents best first (at least max(ks) of them where the corpus has that many)."""
    if not qrels:
        raise ValueError("no judged query: the qrels are empty")
    missing = [q for q in qrels if q not in ranked]
    if missing:
        raise ValueError(f"{len(missing)} judged queries have no ranking (first: {missing[0]!r})")
    out: dict[str, float] = {}
    for k in ks:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        sums = dict.fromkeys(IR_METRICS, 0.0)
        for query, judged in qrels.items():
            for name, value in query_metrics(ranked[query], judged, k).items():
                sums[name] += value
        out.update({f"{name}_at_{k}": sums[name] / len(qrels) for name in IR_METRICS})
    return out


def corpus_metrics(scores: np.ndarray, query_ids: Sequence[str], doc_ids: Sequence[str],
                   qrels: Mapping[str, Mapping[str, int]], ks: Sequence[int]) -> dict[str, float]:
    """:func:`ir_metrics` from a score matrix ``[queries, documents]`` (e.g. query embeddings @ document
    embeddings.T) whose rows follow ``query_ids`` and columns ``doc_ids``; only judged queries count."""
    if len(scores) != len(query_ids):
        raise ValueError(f"{len(scores)} rows of scores for {len(query_ids)} queries")
    rows = [i for i, q in enumerate(query_ids) if q in qrels]
    ranked = dict(zip([query_ids[i] for i in rows], top_k(np.asarray(scores)[rows], doc_ids, max(ks))))
    return ir_metrics(ranked, qrels, ks)
