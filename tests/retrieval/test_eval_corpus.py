"""x-script eval_corpus and x-eval on a BEIR-format corpus. On the dev pairs whose positive is unique, written
as a corpus (the positives) and queries judged 1 on their own positive, eval_corpus's recall@k and MRR equal
x-eval's dev-pool metrics of the same pairs, and x-eval given the folder as a subset reports the same corpus
metrics; a bad qrels line is exit 2 naming file and line, before the model loads and with nothing written
(x-eval --dry too)."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest
from retrieval_helpers import SAMPLE

from tests.train.train_helpers import write_config
from xdpx.cli import run_chain, x_script


def read_tsv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def unique_pairs(folder: Path) -> list[list[str]]:
    """The dev rows whose positive appears once (a duplicate would tie with itself), also as a raw file."""
    rows = [line.split("\t") for line in (SAMPLE / "dev.tsv").read_text().splitlines()]
    counts = Counter(r[1] for r in rows)
    rows = [r for r in rows if counts[r[1]] == 1]
    folder.mkdir()
    (folder / "pairs.tsv").write_text("".join("\t".join(r) + "\n" for r in rows))
    return rows


def write_beir(folder: Path, rows: list[list[str]], qrels_extra: str = "") -> None:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "title": "", "text": r[1]}) + "\n"
                                                 for i, r in enumerate(rows)))
    queries = [json.dumps({"_id": f"q{i}", "text": r[0]}) for i, r in enumerate(rows)]
    queries.append(json.dumps({"_id": "lonely", "text": "a query nobody judged"}))
    (folder / "queries.jsonl").write_text("\n".join(queries) + "\n")
    (folder / "qrels/test.tsv").write_text("query-id\tcorpus-id\tscore\n"
                                           + "".join(f"q{i}\td{i}\t1\n" for i in range(len(rows))) + qrels_extra)


def test_eval_corpus_equals_the_dev_pool_metrics_of_the_same_pairs(retrieval_run, tmp_path, capsys):
    rows = unique_pairs(tmp_path / "raw")
    write_beir(tmp_path / "beir", rows)
    out = tmp_path / "corpus.tsv"
    assert x_script(["eval_corpus", str(retrieval_run), str(tmp_path / "beir"), "--k", "1,10,100",
                     "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"{len(rows)} documents, {len(rows)} judged queries, {len(rows)} judgements; 1 queries without a " \
           "judgement skipped" in printed
    got = {r["metric"]: float(r["value"]) for r in read_tsv(out)}
    assert set(got) == {f"{m}_at_{k}" for m in ("ndcg", "map", "mrr", "recall", "precision") for k in (1, 10, 100)}
    # one relevant document per query: at k = 1 the five metrics are the same count
    assert got["ndcg_at_1"] == got["map_at_1"] == got["mrr_at_1"] == got["recall_at_1"] == got["precision_at_1"]
    # x-eval takes the BEIR folder as a subset beside the raw pairs: one row each in save_to_file
    (tmp_path / "eval.json").write_text(json.dumps({
        "save_dir": str(retrieval_run), "save_to_file": str(tmp_path / "e.tsv"),
        "valid_subset": [str(tmp_path / "raw/pairs.tsv"), str(tmp_path / "beir")]}))
    assert run_chain(["x-eval", str(tmp_path / "eval.json")]) == 0
    pool, corpus = read_tsv(tmp_path / "e.tsv")
    assert corpus["samples"] == str(len(rows)) and corpus["loss"] == "" and pool["ndcg_at_10"] == ""
    for name in (f"{m}_at_{k}" for m in ("ndcg", "map", "mrr", "recall", "precision") for k in (1, 10)):
        assert float(corpus[name]) == pytest.approx(got[name], abs=1e-5), name  # the run's recall_at: 1, 10
    assert got["recall_at_1"] == pytest.approx(float(pool["recall_at_1"]), abs=1e-6)
    assert got["recall_at_10"] == pytest.approx(float(pool["recall_at_10"]), abs=1e-6)
    assert got["mrr_at_100"] == pytest.approx(float(pool["mrr"]), abs=1e-5)  # 100 > the corpus: the full MRR
    assert 0 < got["recall_at_1"] < got["recall_at_10"] <= 1


def test_a_bad_qrels_line_is_exit_2_before_the_model_loads(retrieval_run, tmp_path, capsys):
    rows = unique_pairs(tmp_path / "raw")
    write_beir(tmp_path / "beir", rows, qrels_extra="q0\td999\t1\n")
    out = tmp_path / "corpus.tsv"
    code = x_script(["eval_corpus", str(retrieval_run), str(tmp_path / "beir"), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and f"test.tsv:{len(rows) + 2}: document id 'd999' is not in corpus.jsonl" in err, err
    assert not out.exists()
    assert x_script(["eval_corpus", str(retrieval_run), str(tmp_path / "beir"), "--k", "0,10"]) == 2
    assert "--k '0,10': a comma-separated list of integers >= 1" in capsys.readouterr().err
    (tmp_path / "eval.json").write_text(json.dumps({"save_dir": str(retrieval_run), "save_to_file": str(out),
                                                    "valid_subset": ["dev", str(tmp_path / "beir/qrels/test.tsv")]}))
    assert run_chain(["x-eval", str(tmp_path / "eval.json"), "--dry"]) == 2
    captured = capsys.readouterr()
    assert f"test.tsv:{len(rows) + 2}: document id 'd999' is not in corpus.jsonl" in captured.out + captured.err
    assert not out.exists()


def test_x_eval_refuses_a_corpus_for_a_run_that_is_not_a_bi_encoder(reviews, tmp_path, capsys):
    write_beir(tmp_path / "beir", [["a query", "a document"]])
    assert run_chain(["x-train", str(write_config(tmp_path / "t.json", reviews, tmp_path / "run", max_update=1,
                                                  eval_interval=1))]) == 0
    (tmp_path / "eval.json").write_text(json.dumps({"save_dir": str(tmp_path / "run"),
                                                    "valid_subset": str(tmp_path / "beir")}))
    capsys.readouterr()
    assert run_chain(["x-eval", str(tmp_path / "eval.json"), "--dry"]) == 2
    captured = capsys.readouterr()
    assert "is a retrieval corpus (BEIR layout): it scores a bi-encoder, and this run is a" in captured.out + captured.err
