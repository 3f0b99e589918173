"""Cross-encoder rerankers: x-script rerank_pairs turns mined triplets into labelled pairs, a pair model run
trains on them and scores pairs (the log-odds of label 1, equal to x-pred's probabilities); x-eval of the
reranker on a BEIR folder with a bi-encoder first stage reports both stages, checked against hand counts."""

from __future__ import annotations

import json

import numpy as np
import pytest
from rerank_helpers import ranks_by_hand, read_tsv, stages_by_hand
from retrieval_helpers import dev_beir

from xdpx.cli import run_chain, x_script


def test_rerank_pairs_labels_each_distinct_pair_once(tmp_path, capsys):
    (tmp_path / "t.tsv").write_text("q1\tp1\tn1\t4.0\nq1\tp2\tn1\t5.0\nq2\tp3\tp3x\t4.2\nq2\tp3x\tp3\t4.4\n")
    assert x_script(["rerank_pairs", str(tmp_path / "t.tsv"), str(tmp_path / "out.tsv")]) == 0
    assert (tmp_path / "out.tsv").read_text() == ("q1\tp1\t1\nq1\tn1\t0\nq1\tp2\t1\nq2\tp3\t1\nq2\tp3x\t1\n")
    assert "rerank_pairs: 5 pairs (4 labelled 1, 1 labelled 0); 2 negative(s) that are also the query's " \
           "positive kept as positives" in capsys.readouterr().out


@pytest.mark.parametrize("content, message", [
    ("q1\tp1\n", "t.tsv:1: 2 column(s), no query, positive and negative in columns [0, 1, 2]"),
    ("q1\tp1\tn1\n\t p\tn\n", "t.tsv:2: an empty query"),
    ("", "t.tsv: no triplet in it (an empty file)"),
])
def test_rerank_pairs_refuses_a_bad_line_and_writes_nothing(tmp_path, capsys, content, message):
    (tmp_path / "t.tsv").write_text(content)
    assert x_script(["rerank_pairs", str(tmp_path / "t.tsv"), str(tmp_path / "out.tsv")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out.tsv").exists()


def test_the_reranker_trains_and_its_scores_are_the_log_odds_of_x_pred(reranker, tmp_path):
    rows = read_tsv(reranker / "valid.log.tsv")
    assert float(rows[-1]["best_auc"]) > 0.58 and float(rows[-1]["loss"]) < float(rows[0]["loss"]), rows
    pairs = [line.split("\t") for line in (reranker.parent / "raw/dev.tsv").read_text().splitlines()][:20]
    (tmp_path / "pairs.tsv").write_text("".join(f"{q}\t{p}\t{label}\n" for q, p, label in pairs))
    (tmp_path / "pred.json").write_text(json.dumps({"save_dir": str(reranker),
                                                    "predict_file_map": {str(tmp_path / "pairs.tsv"):
                                                                         str(tmp_path / "pred.tsv")}}))
    assert run_chain(["x-pred", str(tmp_path / "pred.json")]) == 0
    predicted = read_tsv(tmp_path / "pred.tsv")
    from xdpx.inference.rerank import Reranker

    scores = Reranker.load(str(reranker)).score([(q, p) for q, p, _ in pairs])
    assert scores.dtype == np.float64 and scores.shape == (20,)
    p1 = np.array([float(r["prob_1"]) for r in predicted])
    np.testing.assert_allclose(1 / (1 + np.exp(-scores)), p1, atol=2e-6)


def test_x_eval_reranks_the_first_stage_top_k_and_reports_both_stages(retrieval_run, reranker, tmp_path):
    rows = dev_beir(tmp_path / "beir")
    for run, out, extra in ((retrieval_run, "first.tsv", {}),
                            (reranker, "reranked.tsv", {"first_stage": str(retrieval_run), "rerank_k": 5})):
        (tmp_path / "eval.json").write_text(json.dumps({"save_dir": str(run), "valid_subset": str(tmp_path / "beir"),
                                                        "save_to_file": str(tmp_path / out), **extra}))
        assert run_chain(["x-eval", str(tmp_path / "eval.json")]) == 0
    (alone,), (both,) = read_tsv(tmp_path / "first.tsv"), read_tsv(tmp_path / "reranked.tsv")
    names = [f"{m}_at_{k}" for m in ("ndcg", "map", "mrr", "recall", "precision") for k in (1, 10)]
    assert [both[f"first_stage.{n}"] for n in names] == [alone[n] for n in names]  # the bi-encoder's own x-eval

    # by hand: the bi-encoder's embeddings of the pairs (x-pred), each query's 5 nearest positives by cosine,
    # ordered again by the reranker's scores (ties: first-stage order), the 6th to 10th left in place
    _cosines, first, scores = stages_by_hand(tmp_path, retrieval_run, reranker, rows)
    reranked = []
    for q in range(len(rows)):
        mine = scores[5 * q: 5 * q + 5]
        reranked.append([first[q][i] for i in sorted(range(5), key=lambda i: -mine[i])] + first[q][5:])
    for stage, order in (("first_stage.", first), ("", reranked)):
        for name, value in ranks_by_hand(order).items():
            assert float(both[stage + name]) == pytest.approx(value, abs=1e-6), stage + name
    assert ranks_by_hand(reranked) != ranks_by_hand(first)  # the reranker moved documents


def test_x_eval_refuses_a_first_stage_that_is_not_a_bi_encoder_and_a_bi_encoder_as_reranker(
        retrieval_run, reranker, tmp_path, capsys):
    dev_beir(tmp_path / "beir")
    for run, first, message in (
            (reranker, reranker, "key 'first_stage': "),
            (retrieval_run, retrieval_run, "key 'save_dir': ")):
        (tmp_path / "eval.json").write_text(json.dumps({"save_dir": str(run), "valid_subset": str(tmp_path / "beir"),
                                                        "first_stage": str(first)}))
        assert run_chain(["x-eval", str(tmp_path / "eval.json"), "--dry"]) == 2
        err = capsys.readouterr().err
        assert message in err
        assert ("is a re2 run: the first stage retrieves with a bi-encoder" if run == reranker else
                "run (a bi-encoder): a reranker is a cross-encoder") in err, err
