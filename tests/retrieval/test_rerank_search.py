"""Retrieve, then rerank, in x-pred (search_corpus, rerank) and x-serve (--corpus, --reranker, POST /search):
the first stage equals x-script build_index + search on the same texts; the reranked hits are the best
reranker scores among the first rerank_k, checked with the reranker scoring each candidate by hand; x-serve
answers what x-pred writes; bad input is exit 2 (x-pred, x-serve's flags) or 422 (a /search body)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from rerank_helpers import search_pred
from retrieval_helpers import REPO, SAMPLE

from xdpx.cli import run_chain, x_script

ROWS = [line.split("\t") for line in (SAMPLE / "dev.tsv").read_text().splitlines()]
QUERIES = [r[0] for r in ROWS[:5]]


@pytest.fixture(scope="module")
def searched(retrieval_run: Path, reranker: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("search")
    (root / "corpus.txt").write_text("".join(r[1] + "\n" for r in ROWS))
    (root / "queries.txt").write_text("".join(q + "\n" for q in QUERIES))
    return {"root": root, "first": search_pred(root, retrieval_run, "first.tsv", search_k=10),
            "reranked": search_pred(root, retrieval_run, "reranked.tsv", search_k=3, rerank=str(reranker), rerank_k=10)}


def test_the_first_stage_is_build_index_and_search(retrieval_run, searched, tmp_path, capsys):
    first = searched["first"]
    assert list(first[0]) == ["query_number", "query", "rank", "id", "score", "text"] and len(first) == 50
    assert x_script(["build_index", str(retrieval_run), str(SAMPLE / "dev.tsv"), str(tmp_path / "index"),
                     "--column", "1", "--backend", "numpy"]) == 0
    capsys.readouterr()
    assert x_script(["search", str(tmp_path / "index"), *QUERIES, "--k", "10"]) == 0
    found = [line.split("\t") for line in capsys.readouterr().out.splitlines()[1:]]
    assert [[h["query_number"], h["rank"], h["id"]] for h in first] == [f[:1] + f[2:4] for f in found]
    assert [float(h["score"]) for h in first] == pytest.approx([float(f[4]) for f in found], abs=1e-5)
    assert all(h["text"] == ROWS[int(h["id"])][1] for h in first)


def test_the_reranked_hits_are_the_best_reranker_scores_of_the_first_ten(reranker, searched):
    from xdpx.inference.rerank import Reranker

    first, reranked = searched["first"], searched["reranked"]
    assert list(reranked[0]) == ["query_number", "query", "rank", "id", "score", "rerank_score", "first_stage_rank",
                                 "text"]
    model = Reranker.load(str(reranker))
    moved = 0
    for number, query in enumerate(QUERIES):
        candidates = [h for h in first if h["query_number"] == str(number)]
        scores = model.score([(query, h["text"]) for h in candidates])
        best = sorted(range(10), key=lambda i: -scores[i])[:3]  # stable: ties keep the first-stage order
        mine = [h for h in reranked if h["query_number"] == str(number)]
        assert [h["id"] for h in mine] == [candidates[i]["id"] for i in best]
        assert [int(h["first_stage_rank"]) for h in mine] == [i + 1 for i in best]
        assert [float(h["rerank_score"]) for h in mine] == pytest.approx([scores[i] for i in best], rel=1e-5)
        assert [h["score"] for h in mine] == [candidates[i]["score"] for i in best]
        moved += best != [0, 1, 2]
    assert moved > 0  # the reranker changed some order


@pytest.mark.parametrize("options, message", [
    ({"rerank": "R"}, "key 'rerank': a reranker orders the hits of search_corpus"),
    ({"search_corpus": "C", "rerank": "R", "search_k": 20, "rerank_k": 10}, "key 'rerank_k': 10 is below search_k"),
    ({"search_corpus": "C", "rerank": "B"}, "(a bi-encoder): a reranker is a cross-encoder"),
    ({"search_corpus": "C", "binary": True}, "the hits are written as TSV: set binary: false"),
])
def test_x_pred_refuses_bad_search_options_before_writing(retrieval_run, reranker, tmp_path, capsys, options,
                                                           message):
    (tmp_path / "corpus.txt").write_text("a text\n")
    (tmp_path / "queries.txt").write_text("a query\n")
    paths = {"R": str(reranker), "B": str(retrieval_run), "C": str(tmp_path / "corpus.txt")}
    config = {"save_dir": str(retrieval_run), "predict_file_map": {str(tmp_path / "queries.txt"): str(tmp_path / "o")},
              **{k: paths.get(v, v) if isinstance(v, str) else v for k, v in options.items()}}
    (tmp_path / "pred.json").write_text(json.dumps(config))
    assert run_chain(["x-pred", str(tmp_path / "pred.json")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_x_serve_search_answers_what_x_pred_writes(retrieval_run, reranker, searched):
    sys.path.insert(0, str(REPO / "tests/inference"))
    from serve_helpers import request, running_server

    root = searched["root"]
    with running_server(retrieval_run, "--corpus", str(root / "corpus.txt"), "--reranker", str(reranker)) as server:
        answers = [request(server.address, "POST", "/search", body if isinstance(body, bytes) else
                           json.dumps(body).encode()) for body in (
            {"query": QUERIES[1], "k": 10}, {"query": QUERIES[1], "k": 3, "rerank": 10},
            {"query": QUERIES[1], "rerank": 5}, {"qury": "x"}, {"query": "a\x00b"}, b"[1")]
        schema = request(server.address, "GET", "/openapi.json")[1]
    search = schema["paths"]["/search"]["post"]  # with --reranker: rerank described as served
    assert search["summary"].endswith("reranked by a cross-encoder on request")
    assert search["requestBody"]["content"]["application/json"]["schema"]["properties"]["rerank"]["description"] == \
        "the first-stage hits the reranker orders again (at least k)"
    (status, plain, _), (status_rr, reranked, _) = answers[:2]
    assert status == 200 and status_rr == 200, answers[:2]
    expected = [h for h in searched["first"] if h["query_number"] == "1"]
    assert [(h["rank"], h["id"], h["text"]) for h in plain["hits"]] == [(int(e["rank"]), int(e["id"]), e["text"])
                                                                      for e in expected]
    assert [h["score"] for h in plain["hits"]] == pytest.approx([float(e["score"]) for e in expected], rel=1e-5)
    expected = [h for h in searched["reranked"] if h["query_number"] == "1"]
    assert reranked["rerank"] == 10 and [(h["id"], h["first_stage_rank"]) for h in reranked["hits"]] == \
        [(int(e["id"]), int(e["first_stage_rank"])) for e in expected]
    assert [h["rerank_score"] for h in reranked["hits"]] == pytest.approx(
        [float(e["rerank_score"]) for e in expected], rel=1e-5)
    (k_over, body_k), (unknown, body_u), (nul, body_n), (not_json, _) = [(a[0], a[1]) for a in answers[2:]]
    assert k_over == 422 and "rerank is the number of first-stage texts the reranker orders: an integer >= k (10)" \
        in body_k["error"]
    assert unknown == 422 and "unknown field(s) ['qury']" in body_u["error"]
    assert nul == 422 and body_n["error"].startswith("query: a NUL character")
    assert not_json == 400


@pytest.mark.parametrize("flags, message", [
    (["--reranker", "R"], "--reranker reorders the hits of POST /search: give --corpus TEXTS too"),
    (["--corpus", "C"], "--corpus serves POST /search over HTTP: give --port"),
    (["--corpus", "C", "--port", "0", "--workers", "2"], "--corpus is served by one worker process"),
])
def test_x_serve_refuses_search_flags_it_cannot_serve(retrieval_run, tmp_path, capsys, flags, message):
    from xdpx.serve.command import main

    assert main([str(retrieval_run), *flags]) == 2
    assert message in capsys.readouterr().err
