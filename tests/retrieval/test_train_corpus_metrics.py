"""x-train's eval_corpus: every evaluation of a bi-encoder run logs the corpus metrics of a BEIR folder as
corpus.<metric>_at_<k> columns of valid.log.tsv; major_metric corpus.ndcg_at_10 picks the best checkpoint;
x-eval of that checkpoint on the folder reports the very values of its row; kill -9 and resume logs the
same file byte for byte; a bad BEIR folder is exit 2 before anything is written (--dry too)."""

from __future__ import annotations

import csv
import json
import signal
from pathlib import Path

import pytest
from retrieval_helpers import dev_beir, run_killable, train_config

from xdpx.cli import run_chain

METRICS = [f"{m}_at_{k}" for m in ("ndcg", "map", "mrr", "recall", "precision") for k in (1, 10)]


def read_tsv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


@pytest.fixture(scope="module")
def corpus_run(retrieval_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("corpus_run")
    dev_beir(root / "beir")
    config = train_config(root, retrieval_data, eval_corpus=str(root / "beir"), major_metric="corpus.ndcg_at_10")
    assert run_killable(config) == 0
    return root / "run", root / "beir"


def test_every_evaluation_logs_the_corpus_metrics_and_the_best_follows_ndcg(corpus_run):
    run, _ = corpus_run
    rows = read_tsv(run / "valid.log.tsv")
    assert len(rows) >= 3
    for row in rows:
        values = {name: float(row[f"corpus.{name}"]) for name in METRICS}
        assert all(0 <= v <= 1 for v in values.values())
        # one relevant document per query: at k = 1 the five metrics are the same count
        assert values["ndcg_at_1"] == values["map_at_1"] == values["mrr_at_1"] == values["recall_at_1"] \
            == values["precision_at_1"]
        assert values["recall_at_10"] >= values["recall_at_1"]
        assert row["recall_at_10"] != ""  # the in-batch (dev pool) metrics stay beside them
    best = max(rows, key=lambda r: (float(r["corpus.ndcg_at_10"]), -int(r["step"])))
    assert rows[-1]["best_step"] == best["step"]
    assert float(rows[-1]["best_corpus.ndcg_at_10"]) == float(best["corpus.ndcg_at_10"])


def test_eval_of_the_best_checkpoint_equals_its_row(corpus_run, tmp_path):
    run, beir = corpus_run
    rows = read_tsv(run / "valid.log.tsv")
    best = next(r for r in rows if r["step"] == rows[-1]["best_step"])
    out = tmp_path / "scores.tsv"
    (tmp_path / "eval.json").write_text(json.dumps({"save_dir": str(run), "valid_subset": str(beir),
                                                    "save_to_file": str(out)}))
    assert run_chain(["x-eval", str(tmp_path / "eval.json")]) == 0
    (row,) = read_tsv(out)
    assert [row[name] for name in METRICS] == [best[f"corpus.{name}"] for name in METRICS]


def test_kill_during_training_then_resume_logs_the_same_file(retrieval_data, corpus_run, tmp_path):
    run, beir = corpus_run
    config = train_config(tmp_path, retrieval_data, eval_corpus=str(beir), major_metric="corpus.ndcg_at_10")
    assert run_killable(config, "update", 13) == -signal.SIGKILL
    assert run_killable(config) == 0
    assert (tmp_path / "run/valid.log.tsv").read_text() == (run / "valid.log.tsv").read_text()


@pytest.mark.parametrize("dry", [False, True])
def test_a_qrels_line_naming_an_unknown_document_is_exit_2_before_any_write(retrieval_data, tmp_path, capsys, dry):
    dev_beir(tmp_path / "beir", qrels_extra="q0\td999\t1\n")
    lines = (tmp_path / "beir/qrels/test.tsv").read_text().count("\n")
    config = train_config(tmp_path, retrieval_data, eval_corpus=str(tmp_path / "beir"))
    assert run_chain(["x-train", str(config), *(["--dry"] if dry else [])]) == 2
    err = capsys.readouterr().err
    assert f"qrels/test.tsv:{lines}: document id 'd999' is not in corpus.jsonl" in err
    assert not (tmp_path / "run").exists()


def test_an_empty_corpus_and_a_duplicate_id_are_refused(retrieval_data, tmp_path, capsys):
    dev_beir(tmp_path / "beir")
    corpus = tmp_path / "beir/corpus.jsonl"
    first = corpus.read_text().splitlines()[0]
    corpus.write_text(first + "\n" + first + "\n")
    config = train_config(tmp_path, retrieval_data, eval_corpus=str(tmp_path / "beir"))
    assert run_chain(["x-train", str(config)]) == 2
    assert "corpus.jsonl:2: id 'd0' is already on line 1: ids must be unique" in capsys.readouterr().err
    corpus.write_text("\n")
    assert run_chain(["x-train", str(config)]) == 2
    assert "corpus.jsonl: the corpus is empty" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_major_metric_of_the_corpus_needs_eval_corpus(retrieval_data, tmp_path, capsys):
    config = train_config(tmp_path, retrieval_data, major_metric="corpus.ndcg_at_10")
    assert run_chain(["x-train", str(config), "--dry"]) == 2
    assert "with eval_corpus corpus.<ndcg|map|mrr|recall|precision>_at_<k>" in capsys.readouterr().err
