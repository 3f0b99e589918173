"""Corpus retrieval metrics (NDCG, MAP, MRR, recall, precision at k; xdpx/metrics/ir.py) against hand counts
and an independent plain-Python count, and the BEIR-format reader (xdpx/data/beir.py) with its errors.
(pytrec_eval and ranx do not install here: pytrec-eval 0.5 fails to build, ranx is not in the package lists.)"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

from xdpx.config.errors import ConfigError
from xdpx.data.beir import BeirError, read_beir
from xdpx.metrics.ir import corpus_metrics, ir_metrics, top_k

DOCS = ["d1", "d2", "d3", "d4", "d5"]
QUERIES = ["q1", "q2", "q3"]
# q1: d2 0.9 > d5 0.7 > d4 0.5 = d3 0.5 (equal: the larger id first, as trec_eval) > d1 0.1
SCORES = np.array([[0.1, 0.9, 0.5, 0.5, 0.7],
                   [0.2, 0.8, 0.1, 0.3, 0.0],
                   [0.9, 0.1, 0.1, 0.1, 0.1]])
QRELS = {"q1": {"d1": 2, "d3": 1, "d5": 0}, "q2": {"d2": 1}}  # q3 has no judgement: not evaluated


def test_ties_go_to_the_larger_document_id():
    assert top_k(SCORES, DOCS, 5) == [["d2", "d5", "d4", "d3", "d1"], ["d2", "d4", "d1", "d3", "d5"],
                                      ["d1", "d5", "d4", "d3", "d2"]]
    assert top_k(SCORES, DOCS, 3)[2] == ["d1", "d5", "d4"]  # the cut keeps the tie order


def test_the_metrics_are_the_hand_counts():
    got = corpus_metrics(SCORES, QUERIES, DOCS, QRELS, [3, 5])
    # k = 3: q1's top 3 (d2, d5, d4) holds nothing relevant (d5 is judged 0): all 0; q2 finds d2 first
    assert got["ndcg_at_3"] == got["map_at_3"] == got["mrr_at_3"] == got["recall_at_3"] == pytest.approx(0.5)
    assert got["precision_at_3"] == pytest.approx((0 + 1 / 3) / 2)
    # k = 5: q1 finds d3 (grade 1) at rank 4 and d1 (grade 2) at rank 5
    dcg = 1 / math.log2(5) + 2 / math.log2(6)
    idcg = 2 / math.log2(2) + 1 / math.log2(3)
    assert dcg / idcg == pytest.approx(0.457778, abs=1e-6)
    assert got["ndcg_at_5"] == pytest.approx((0.457778 + 1) / 2, abs=1e-6)
    assert got["map_at_5"] == pytest.approx(((1 / 4 + 2 / 5) / 2 + 1) / 2)  # precision@4, @5 over 2 relevant
    assert got["mrr_at_5"] == pytest.approx((1 / 4 + 1) / 2)
    assert got["recall_at_5"] == 1.0
    assert got["precision_at_5"] == pytest.approx((2 / 5 + 1 / 5) / 2)


def test_map_divides_by_all_relevant_documents_and_a_query_without_a_relevant_one_scores_0():
    # 3 relevant documents, only d2 in the top 2: AP@2 = (1 / 1) / 3; q2 judged with grade 0 only
    got = ir_metrics({"q1": ["d2", "d9", "d3"], "q2": ["d1"]},
                     {"q1": {"d2": 1, "d3": 1, "d4": 3}, "q2": {"d1": 0}}, [2])
    assert got["map_at_2"] == pytest.approx((1 / 3 + 0) / 2)
    assert got["recall_at_2"] == pytest.approx((1 / 3 + 0) / 2)
    # ideal order: d4 (3), d2 (1): IDCG@2 = 3 + 1 / log2 3; DCG@2 = 1
    assert got["ndcg_at_2"] == pytest.approx(1 / (3 + 1 / math.log2(3)) / 2)
    with pytest.raises(ValueError, match="1 judged queries have no ranking \\(first: 'q2'\\)"):
        ir_metrics({"q1": ["d1"]}, {"q1": {"d1": 1}, "q2": {"d1": 1}}, [1])


def plain_count(scores: list[float], docs: list[str], judged: dict[str, int], k: int) -> dict[str, float]:
    """Another count of one query's metrics: two stable full sorts (ids descending, then scores), no numpy."""
    by_id = sorted(range(len(docs)), key=lambda i: docs[i], reverse=True)
    order = sorted(by_id, key=lambda i: -scores[i])
    top = [docs[i] for i in order[:k]]
    relevant = [d for d in top if judged.get(d, 0) >= 1]
    total = len([g for g in judged.values() if g >= 1])
    ideal = sorted(judged.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal) if g > 0)
    dcg = sum(max(judged.get(d, 0), 0) / math.log2(i + 2) for i, d in enumerate(top))
    ap = sum(len([x for x in top[: i + 1] if judged.get(x, 0) >= 1]) / (i + 1)
             for i, d in enumerate(top) if judged.get(d, 0) >= 1)
    ranks = [i + 1 for i, d in enumerate(top) if judged.get(d, 0) >= 1]
    return {"ndcg": dcg / idcg if idcg else 0.0, "map": ap / total if total else 0.0,
            "mrr": 1 / ranks[0] if ranks else 0.0, "recall": len(relevant) / total if total else 0.0,
            "precision": len(relevant) / k}


def test_random_rankings_with_ties_agree_with_a_plain_count():
    rng = random.Random(3)
    docs = [f"doc{i}" for i in range(40)]
    queries = [f"q{i}" for i in range(25)]
    scores = [[rng.choice([0.0, 0.25, 0.5, 0.75, 1.0]) for _ in docs] for _ in queries]  # many ties
    qrels = {q: {d: rng.choice([0, 1, 1, 2, 3]) for d in rng.sample(docs, rng.randint(1, 6))} for q in queries[:20]}
    got = corpus_metrics(np.array(scores), queries, docs, qrels, [1, 5, 10])
    for k in (1, 5, 10):
        for name in ("ndcg", "map", "mrr", "recall", "precision"):
            expected = sum(plain_count(scores[i], docs, qrels[q], k)[name] for i, q in enumerate(queries[:20])) / 20
            assert got[f"{name}_at_{k}"] == pytest.approx(expected, abs=1e-12), (name, k)


def write_beir(folder: Path, corpus: list[str] | None = None, queries: list[str] | None = None,
               qrels: list[str] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "qrels").mkdir(exist_ok=True)
    corpus = corpus if corpus is not None else [
        json.dumps({"_id": "d1", "title": "Planes", "text": "A plane is taking off."}),
        json.dumps({"_id": "d2", "text": "A man plays the cello."}), "",
        json.dumps({"_id": 3, "title": "", "text": "Two men are fighting."})]
    queries = queries if queries is not None else [
        json.dumps({"_id": "q1", "text": "plane"}), json.dumps({"_id": "q2", "text": "cello"}),
        json.dumps({"_id": "q3", "text": "no judgement"})]
    qrels = qrels if qrels is not None else ["query-id\tcorpus-id\tscore", "q1\td1\t2", "q2\td2\t1", "q2\t3\t0"]
    (folder / "corpus.jsonl").write_text("\n".join(corpus) + "\n")
    (folder / "queries.jsonl").write_text("\n".join(queries) + "\n")
    (folder / "qrels/test.tsv").write_text("\n".join(qrels) + "\n")
    return folder


def test_a_beir_folder_is_read_and_queries_without_a_judgement_are_counted(tmp_path):
    data = read_beir(write_beir(tmp_path / "set"))
    assert data.corpus == {"d1": ("Planes", "A plane is taking off."), "d2": ("", "A man plays the cello."),
                           "3": ("", "Two men are fighting.")}
    assert data.queries == {"q1": "plane", "q2": "cello"} and data.unjudged == 1
    assert data.qrels == {"q1": {"d1": 2}, "q2": {"d2": 1, "3": 0}}
    assert data.summary() == (f"{tmp_path / 'set'}: 3 documents, 2 judged queries, 3 judgements; "
                              "1 queries without a judgement skipped")


@pytest.mark.parametrize("part, lines, message", [
    ("qrels", ["query-id\tcorpus-id\tscore", "q1\td1\t1", "q9\td1\t1"], "test.tsv:3: query id 'q9' is not in queries.jsonl"),
    ("qrels", ["query-id\tcorpus-id\tscore", "q1\td7\t1"], "test.tsv:2: document id 'd7' is not in corpus.jsonl"),
    ("qrels", ["query-id\tcorpus-id\tscore", "q1\td1\t1", "q1\td1\t2"],
     "test.tsv:3: query 'q1' and document 'd1' are already judged on line 2"),
    ("qrels", ["query-id\tcorpus-id\tscore", "q1\td1\thigh"], "test.tsv:2: the score 'high' is not an integer"),
    ("qrels", ["query-id\tcorpus-id\tscore", "q1 d1 1"], "test.tsv:2: expected 3 tab-separated columns"),
    ("qrels", ["query-id\tcorpus-id\tscore"], "test.tsv: no judgement"),
    ("corpus", [], "corpus.jsonl: the corpus is empty"),
    ("corpus", [json.dumps({"_id": "d1", "text": "a"}), json.dumps({"_id": "d1", "text": "b"})],
     "corpus.jsonl:2: id 'd1' is already on line 1: ids must be unique"),
    ("corpus", [json.dumps({"_id": "d1", "text": "a"}), "{not json"], "corpus.jsonl:2: not a JSON object"),
    ("queries", [json.dumps({"_id": "q1"})], "queries.jsonl:1: no 'text'"),
])
def test_bad_beir_files_are_one_line_naming_the_file_and_line(tmp_path, part, lines, message):
    folder = write_beir(tmp_path / "set", **{part: lines})
    with pytest.raises(BeirError) as caught:
        read_beir(folder)
    text = str(caught.value)
    assert message in text and "\n" not in text and text.startswith(str(folder))
    assert isinstance(caught.value, ConfigError)  # the commands exit 2 on it


def test_a_missing_folder_or_split_is_named(tmp_path):
    with pytest.raises(BeirError, match="no such folder"):
        read_beir(tmp_path / "nothing")
    with pytest.raises(BeirError, match=r"qrels/dev.tsv: no such file"):
        read_beir(write_beir(tmp_path / "set"), split="dev")
