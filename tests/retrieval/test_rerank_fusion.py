"""rerank_weight: the reranker's score fused with the first stage's (a convex combination of the two, each
min-max normalised over a query's reranked candidates) in x-eval, x-pred and x-serve. fuse_scores against
hand-computed values; x-eval and x-pred against orders computed here from their own scores; weight 0 is the
first stage's order everywhere; bad weights are exit 2 naming the key or flag."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from rerank_helpers import ranks_by_hand, read_tsv, search_pred, stages_by_hand
from retrieval_helpers import REPO, SAMPLE, dev_beir

from xdpx.cli import run_chain
from xdpx.inference.rerank import fuse_scores, fused_order, rerank_lists, rerank_order

ROWS = [line.split("\t") for line in (SAMPLE / "dev.tsv").read_text().splitlines()]
QUERIES = [r[0] for r in ROWS[:5]]
NAMES = [f"{m}_at_{k}" for m in ("ndcg", "map", "mrr", "recall", "precision") for k in (1, 10)]


def by_hand(rerank: list[float], first: list[float], weight: float) -> list[int]:
    """The fused order written out: each list scaled to [0, 1] by its own min and max, weighed, sorted."""
    def scaled(xs: list[float]) -> list[float]:
        low, high = min(xs), max(xs)
        return [0.0 if high == low else (x - low) / (high - low) for x in xs]

    fused = [weight * r + (1 - weight) * f for r, f in zip(scaled(rerank), scaled(first))]
    return sorted(range(len(fused)), key=lambda i: -fused[i])  # stable: ties keep the first-stage order


def test_fuse_scores_against_hand_computed_values():
    # rerank [2, 0, 1] -> [1, 0, .5]; first [.9, .8, .1] -> [1, .875, 0]; halves -> [1, .4375, .25]
    fused = fuse_scores(np.array([2.0, 0.0, 1.0]), np.array([0.9, 0.8, 0.1]), 0.5)
    assert fused.dtype == np.float64
    np.testing.assert_allclose(fused, [1.0, 0.4375, 0.25], rtol=0, atol=1e-15)
    assert fused_order([2.0, 0.0, 1.0], [0.9, 0.8, 0.1], 0.5).tolist() == [0, 1, 2]
    # w = .8: [.8 + .2, 0 + .175, .4 + 0] -> the reranker's second (.4) passes the first stage's second (.175)
    np.testing.assert_allclose(fuse_scores([2, 0, 1], [0.9, 0.8, 0.1], 0.8), [1.0, 0.175, 0.4], atol=1e-15)
    assert fused_order([2, 0, 1], [0.9, 0.8, 0.1], 0.8).tolist() == [0, 2, 1]


def test_fuse_scores_constant_lists_and_ties():
    assert fuse_scores([3.0], [0.7], 0.3).tolist() == [0.0]  # one candidate: both lists constant
    np.testing.assert_allclose(fuse_scores([1.0, 1.0, 1.0], [0.9, 0.5, 0.4], 0.5), [0.5, 0.1, 0.0], atol=1e-15)
    assert fuse_scores([5.0, 5.0], [0.2, 0.2], 0.5).tolist() == [0.0, 0.0]
    # ties keep the first-stage order: [.5, .5, .5] everywhere
    assert fused_order([1.0, 0.0, 0.5], [0.0, 1.0, 0.5], 0.5).tolist() == [0, 1, 2]
    assert fuse_scores([], [], 0.5).tolist() == []
    with pytest.raises(ValueError, match="2 reranker scores for 3 first-stage scores"):
        fuse_scores([1.0, 2.0], [0.1, 0.2, 0.3], 0.5)


def test_weight_one_is_the_reranker_order_exactly_and_zero_the_first_stage_order():
    generator = np.random.default_rng(0)
    for _ in range(200):
        n = int(generator.integers(1, 30))
        rerank = np.round(generator.normal(size=n), int(generator.integers(0, 3)))  # rounding makes ties
        first = np.sort(np.round(generator.uniform(-1, 1, size=n), 1))[::-1]  # first-stage order: descending
        assert fused_order(rerank, first, 1.0).tolist() == rerank_order(rerank).tolist()
        assert fused_order(rerank, first, 0.0).tolist() == list(range(n))
        weight = float(generator.uniform())
        assert fused_order(rerank, first, weight).tolist() == by_hand(list(rerank), list(first), weight)
    # 1 and 1 + 2^-52 become one value once -1e20 is subtracted: min-max scaling ties them, and weight 1
    # still orders them as the reranker does
    rerank = np.array([1.0, 1.0 + 2.0 ** -52, -1e20, 0.0])
    assert rerank_order(fuse_scores(rerank, np.zeros(4), 1.0)).tolist() == [0, 1, 3, 2]
    assert fused_order(rerank, np.zeros(4), 1.0).tolist() == rerank_order(rerank).tolist() == [1, 0, 3, 2]


def test_rerank_lists_needs_the_first_stage_scores_below_weight_one(reranker):
    from xdpx.inference.rerank import Reranker

    with pytest.raises(ValueError, match="pass first_scores"):
        rerank_lists(Reranker.load(str(reranker)), ["q"], [["a", "b"]], weight=0.5)


def x_eval(tmp_path: Path, run: Path, out: str, **options: object) -> dict[str, str]:
    (tmp_path / "eval.json").write_text(json.dumps({"save_dir": str(run), "valid_subset": str(tmp_path / "beir"),
                                                    "save_to_file": str(tmp_path / out), **options}))
    assert run_chain(["x-eval", str(tmp_path / "eval.json")]) == 0
    return read_tsv(tmp_path / out)[0]


def test_x_eval_weight_zero_is_the_first_stage_and_a_middle_weight_the_fused_order(retrieval_run, reranker,
                                                                                    tmp_path):
    rows = dev_beir(tmp_path / "beir")
    first_stage = {"first_stage": str(retrieval_run), "rerank_k": 5}
    zero = x_eval(tmp_path, reranker, "zero.tsv", rerank_weight=0, **first_stage)
    assert [zero[n] for n in NAMES] == [zero[f"first_stage.{n}"] for n in NAMES]  # the same strings
    half = x_eval(tmp_path, reranker, "half.tsv", rerank_weight=0.5, **first_stage)
    alone = x_eval(tmp_path, reranker, "alone.tsv", **first_stage)

    # by hand: the bi-encoder's cosines (x-pred's embeddings), each query's top 5 fused with the reranker's
    # scores at 0.5, the 6th to 10th left in place
    cosines, first, scores = stages_by_hand(tmp_path, retrieval_run, reranker, rows)
    fused, reranked = [], []
    for q in range(len(rows)):
        mine = list(scores[5 * q: 5 * q + 5])
        fused.append([first[q][i] for i in by_hand(mine, [cosines[q][d] for d in first[q][:5]], 0.5)] + first[q][5:])
        reranked.append([first[q][i] for i in by_hand(mine, [0.0] * 5, 1.0)] + first[q][5:])
    for name, value in ranks_by_hand(fused).items():
        assert float(half[name]) == pytest.approx(value, abs=1e-6), name
    assert fused != first and fused != reranked  # the fusion is neither stage's order on this set
    assert [half[f"first_stage.{n}"] for n in NAMES] == [alone[f"first_stage.{n}"] for n in NAMES]
    assert [float(r["rerank_weight"]) for r in (zero, half, alone)] == [0.0, 0.5, 1.0]  # each row names its weight


@pytest.mark.parametrize("options, message", [
    ({"first_stage": "B", "rerank_weight": 1.5}, "key 'rerank_weight'"),
    ({"first_stage": "B", "rerank_weight": "half"}, "key 'rerank_weight'"),
    ({"rerank_weight": 0.5}, "key 'rerank_weight': 0.5 weighs a reranker's scores against the first stage's, and "
                             "first_stage is not set: set first_stage or remove rerank_weight"),
])
def test_x_eval_refuses_a_bad_or_idle_rerank_weight(retrieval_run, reranker, tmp_path, capsys, options, message):
    dev_beir(tmp_path / "beir")
    config = {"save_dir": str(reranker), "valid_subset": str(tmp_path / "beir"), "save_to_file": str(tmp_path / "o"),
              **{k: str(retrieval_run) if v == "B" else v for k, v in options.items()}}
    (tmp_path / "eval.json").write_text(json.dumps(config))
    assert run_chain(["x-eval", str(tmp_path / "eval.json")]) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert not (tmp_path / "o").exists()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fusion")
    (root / "corpus.txt").write_text("".join(r[1] + "\n" for r in ROWS))
    (root / "queries.txt").write_text("".join(q + "\n" for q in QUERIES))
    return root


def test_x_pred_weight_zero_writes_the_first_stage_order_and_a_middle_weight_the_fused_one(retrieval_run, reranker,
                                                                                           corpus):
    first = search_pred(corpus, retrieval_run, "first.tsv", search_k=3)
    zero = search_pred(corpus, retrieval_run, "zero.tsv", search_k=3, rerank=str(reranker), rerank_k=10, rerank_weight=0)
    assert all(h["rank"] == h["first_stage_rank"] for h in zero) and len(zero) == 15
    assert [(h["query_number"], h["id"], h["score"]) for h in zero] == \
        [(h["query_number"], h["id"], h["score"]) for h in first]
    assert all(np.isfinite(float(h["rerank_score"])) for h in zero)

    # all ten reranked hits written: their order is the fusion of their own two score columns
    half = search_pred(corpus, retrieval_run, "half.tsv", search_k=10, rerank=str(reranker), rerank_k=10,
                  rerank_weight=0.5)
    moved = 0
    for number in range(len(QUERIES)):
        hits = sorted((h for h in half if h["query_number"] == str(number)), key=lambda h: int(h["first_stage_rank"]))
        order = by_hand([float(h["rerank_score"]) for h in hits], [float(h["score"]) for h in hits], 0.5)
        assert [int(hits[i]["rank"]) for i in order] == list(range(1, 11))
        moved += order != list(range(10))
    assert moved > 0


@pytest.mark.parametrize("options, message", [
    ({"search_corpus": "C", "rerank": "R", "rerank_weight": 1.5}, "key 'rerank_weight'"),
    ({"search_corpus": "C", "rerank_weight": 0.5}, "key 'rerank_weight': 0.5 weighs a reranker's scores against "
                                                   "the first stage's, and rerank is not set"),
    ({"rerank_weight": 0.0}, "and rerank is not set: set rerank or remove rerank_weight"),
])
def test_x_pred_refuses_a_bad_or_idle_rerank_weight(retrieval_run, reranker, tmp_path, capsys, options, message):
    (tmp_path / "corpus.txt").write_text("a text\n")
    (tmp_path / "queries.txt").write_text("a query\n")
    paths = {"R": str(reranker), "C": str(tmp_path / "corpus.txt")}
    config = {"save_dir": str(retrieval_run), "predict_file_map": {str(tmp_path / "queries.txt"): str(tmp_path / "o")},
              **{k: paths.get(v, v) if isinstance(v, str) else v for k, v in options.items()}}
    (tmp_path / "pred.json").write_text(json.dumps(config))
    assert run_chain(["x-pred", str(tmp_path / "pred.json")]) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert not (tmp_path / "o").exists()


def test_x_serve_rerank_weight_zero_answers_the_first_stage_order(retrieval_run, reranker, corpus):
    sys.path.insert(0, str(REPO / "tests/inference"))
    from serve_helpers import request, running_server

    with running_server(retrieval_run, "--corpus", str(corpus / "corpus.txt"), "--reranker", str(reranker),
                        "--rerank-weight", "0") as server:
        (status, plain, _), (status_rr, reranked, _) = [
            request(server.address, "POST", "/search", json.dumps(body).encode())
            for body in ({"query": QUERIES[1], "k": 3}, {"query": QUERIES[1], "k": 3, "rerank": 10})]
    assert status == 200 and status_rr == 200, (plain, reranked)
    assert [h["first_stage_rank"] for h in reranked["hits"]] == [1, 2, 3] == [h["rank"] for h in reranked["hits"]]
    assert [h["id"] for h in reranked["hits"]] == [h["id"] for h in plain["hits"]]
    assert all(isinstance(h["rerank_score"], float) for h in reranked["hits"])


@pytest.mark.parametrize("flags, message", [
    (["--corpus", "C", "--port", "0", "--rerank-weight", "0.5"],
     "--rerank-weight weighs the reranker's scores against the cosines: give --reranker RUN too"),
    (["--corpus", "C", "--port", "0", "--reranker", "R", "--rerank-weight", "1.5"],
     "--rerank-weight must be in [0, 1] (the reranker's share of the order), got 1.5"),
    (["--corpus", "C", "--port", "0", "--reranker", "R", "--rerank_weight", "nan"], "--rerank-weight must be in [0, 1]"),
])
def test_x_serve_refuses_a_bad_or_idle_rerank_weight(retrieval_run, tmp_path, capsys, flags, message):
    from xdpx.serve.command import main

    assert main([str(retrieval_run), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


def test_x_serve_refuses_a_weight_that_is_not_a_number(retrieval_run, capsys):
    from xdpx.serve.command import main

    with pytest.raises(SystemExit) as stopped:
        main([str(retrieval_run), "--rerank-weight", "half"])
    assert stopped.value.code == 2 and "--rerank-weight" in capsys.readouterr().err
