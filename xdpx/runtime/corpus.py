"""A BEIR-format corpus as an x-eval subset: ``valid_subset: [dev, data/scifact]`` scores a bi-encoder run
on the corpus of ``data/scifact`` (its ``qrels/test.tsv``) besides its dev split; naming a qrels file,
``data/scifact/qrels/dev.tsv``, picks that split. Every document (title and text joined by a space) and
every judged query is embedded on its own with the run's processor, each query ranks the whole corpus by
dot product (the cosine of the bi-encoders' normalised embeddings), and the row reports the metrics of
xdpx/metrics/ir.py at each k of the run's ``recall_at`` (``ndcg_at_10``, ``map_at_10``, ``mrr_at_10``,
``recall_at_10``, ``precision_at_10``), and at each Matryoshka width of the run (``ndcg_at_10@64``).
``samples`` is the number of judged queries. The files are read when x-eval checks its config (``--dry``
too): a bad one is a config error naming file and line, exit 2, before the model loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from xdpx import io
from xdpx.config.errors import ConfigError
from xdpx.data.beir import BeirSet, read_beir
from xdpx.metrics.ir import ir_metrics, top_k
from xdpx.models.choice import head_name, model_label


@dataclass
class CorpusSubset:
    """A BEIR folder and split read for x-eval."""

    name: str
    data: BeirSet

    def __len__(self) -> int:
        return len(self.data.queries)


def corpus_location(name: str) -> tuple[Path, str] | None:
    """(folder, split) when ``name`` is a BEIR folder (split test) or a qrels/<split>.tsv inside one."""
    if io.is_remote(name):  # the reader reads local files (a remote corpus: copy it first)
        return None
    path = Path(name)
    if path.is_dir() and (path / "corpus.jsonl").is_file():
        return path, "test"
    if path.suffix == ".tsv" and path.parent.name == "qrels" and (path.parent.parent / "corpus.jsonl").is_file():
        return path.parent.parent, path.stem
    return None


def corpus_subset(name: str, run_args: Any, where: str) -> CorpusSubset | None:
    """The corpus ``name`` names, read and checked; None when it names none. ConfigError for a run that is
    not a bi-encoder."""
    location = corpus_location(name)
    if location is None:
        return None
    if run_args is not None and head_name(run_args) != "bi_encoder":
        raise ConfigError(f"{where}: {name!r} is a retrieval corpus (BEIR layout): it scores a bi-encoder, and "
                          f"this run is a {model_label(run_args)}")
    return CorpusSubset(name, read_beir(*location))


def embed(loaded: Any, texts: list[str], context: Any = None, progress: str = "x-eval corpus") -> np.ndarray:
    """``[N, D]`` float32 embeddings, each text encoded on its own (as x-serve's /embed): the corpus metrics
    and x-script build_index, search and mine_negatives embed through it."""
    from xdpx.runtime.scoring import predict_logits  # lazy: loads torch

    samples = []
    for i, text in enumerate(texts):
        sample = loaded.processor.encode([text])
        sample["id"] = i
        samples.append(sample)
    outputs = predict_logits(loaded.task, loaded.model, loaded.processor, samples, loaded.batch_size, loaded.autocast,
                             loaded.to_device, context=context, progress=progress)
    return np.ascontiguousarray(outputs.numpy().reshape(len(texts), -1), dtype=np.float32)


def rank_metrics(queries: np.ndarray, documents: np.ndarray, query_ids: list[str], doc_ids: list[str],
                 qrels: dict[str, dict[str, int]], ks: list[int]) -> dict[str, float]:
    """The corpus metrics of query and document embeddings, in blocks of queries (memory: [block, documents])."""
    ranked: dict[str, list[str]] = {}
    for start in range(0, len(queries), 256):
        ranked.update(zip(query_ids[start: start + 256], top_k(queries[start: start + 256] @ documents.T,
                                                                doc_ids, max(ks))))
    return ir_metrics(ranked, qrels, ks)


def cut(vectors: np.ndarray, dim: int) -> np.ndarray:
    """The first ``dim`` dimensions, normalised again (a Matryoshka width is compared by cosine)."""
    part = vectors[:, :dim]
    return part / np.maximum(np.linalg.norm(part, axis=1, keepdims=True), 1e-12)


def evaluate_corpus(loaded: Any, data: BeirSet, ks: list[int], context: Any = None) -> dict[str, float]:
    """The metrics at each k (and each Matryoshka width of the run) of ``loaded``'s embeddings."""
    doc_ids, query_ids = list(data.corpus), list(data.queries)
    documents = embed(loaded, [f"{title} {text}".strip() for title, text in data.corpus.values()], context)
    documents = documents.astype(np.float64)
    queries = embed(loaded, list(data.queries.values()), context).astype(np.float64)
    metrics = rank_metrics(queries, documents, query_ids, doc_ids, data.qrels, ks)
    for dim in loaded.run_args.get("matryoshka_dims") or []:
        if dim < documents.shape[1]:
            at = rank_metrics(cut(queries, dim), cut(documents, dim), query_ids, doc_ids, data.qrels, ks)
            metrics.update({f"{name}@{dim}": value for name, value in at.items()})
    return metrics
