"""x-script mine_negatives on the committed retrieval sample with the tiny retrieval run: the triplet file it
writes is read by x-prepro (loader triplet) and trained on (loss triplet); every negative is a corpus text and
none is a positive of its query; the --max-score threshold and the --margin below the positives drop
candidates, --negatives writes several per pair; bad input (an empty file, a
run that is not a bi-encoder) is one line, exit 2, nothing written."""

from __future__ import annotations

import shutil

import hjson
import numpy as np
from retrieval_helpers import SAMPLE, prepro, train_config

from tests.train.train_helpers import write_config
from xdpx.cli import run_chain, x_script
from xdpx.scripts.build_index import embed_texts, load_bi_encoder
from xdpx.scripts.mine_negatives import pick_negatives

PAIRS = [line.split("\t") for line in (SAMPLE / "train.tsv").read_text().splitlines()]


def test_mined_triplets_are_read_by_x_prepro_and_trained_on(retrieval_run, tmp_path, capsys):
    raw = tmp_path / "raw"
    raw.mkdir()
    assert x_script(["mine_negatives", str(retrieval_run), str(SAMPLE / "train.tsv"), str(raw / "train.tsv"),
                     "--k", "10", "--max-score", "0.99"]) == 0
    out = capsys.readouterr().out
    rows = [line.split("\t") for line in (raw / "train.tsv").read_text().splitlines()]
    queries = {p[0] for p in PAIRS}
    assert (f"mine_negatives: {len(PAIRS)} pairs, {len(queries)} distinct queries; corpus "
            f"{len({p[1] for p in PAIRS})} texts (the positives of TRAIN_FILE)") in out, out
    assert f"mine_negatives: {len(rows)} triplets (query, positive, hard negative) -> {raw / 'train.tsv'}; " \
           f"{len(PAIRS) - len(rows)} pairs without a usable negative in the top 10 (left out)" in out, out
    assert len(rows) > len(PAIRS) // 2
    positives: dict[str, set[str]] = {}
    for query, positive, _score in PAIRS:
        positives.setdefault(query, set()).add(positive)
    corpus = {p[1] for p in PAIRS}
    scores = {(q, p): s for q, p, s in PAIRS}
    for query, positive, negative, score in rows:
        assert negative != positive and negative not in positives[query] and negative != query
        assert negative in corpus
        assert scores[(query, positive)] == score  # the pair's own score column is kept, last
    assert [r[:2] for r in rows] == [p[:2] for p in PAIRS if p[0] in {r[0] for r in rows}]  # file order
    shutil.copy(raw / "train.tsv", raw / "dev.tsv")
    data = prepro(tmp_path, data_source=str(raw), loader="triplet",
                  data_files={"train.tsv": "train", "dev.tsv": "dev"})
    meta = hjson.loads((data / "meta.hjson").read_text())
    assert (meta["loader"], meta["text3_column"], meta["data_size"]["train"]) == ("triplet", 2, len(rows))
    config = train_config(tmp_path, data, loss="triplet", max_epoch=..., max_update=3, eval_interval=3)
    assert run_chain(["x-train", str(config)]) == 0
    assert (tmp_path / "run" / "checkpoint-3.pt").exists()


def test_a_corpus_file_and_the_max_score_threshold(retrieval_run, tmp_path, capsys):
    corpus = tmp_path / "corpus.tsv"
    dev = [line.split("\t") for line in (SAMPLE / "dev.tsv").read_text().splitlines()]
    corpus.write_text("".join(f"{i}\t{row[1]}\n" for i, row in enumerate(dev)))
    out = tmp_path / "triplets.tsv"
    assert x_script(["mine_negatives", str(retrieval_run), str(SAMPLE / "train.tsv"), str(out),
                     "--corpus", str(corpus), "--corpus-column", "1", "--k", "3", "--max-score", "1.01"]) == 0
    rows = [line.split("\t") for line in out.read_text().splitlines()]
    assert len(rows) == len(PAIRS)  # three dev positives each, at most one of them a positive of the query
    assert {r[2] for r in rows} <= {row[1] for row in dev}
    capsys.readouterr()
    # every candidate scores above -1.5: none is usable, the command says so and writes nothing
    assert x_script(["mine_negatives", str(retrieval_run), str(SAMPLE / "train.tsv"), str(tmp_path / "none.tsv"),
                     "--max-score", "-1.5", "--k", "3"]) == 1
    err = capsys.readouterr().err
    assert (f"{SAMPLE / 'train.tsv'}: no pair has a usable negative among the top 3 (positives dropped, ") in err, err
    assert "candidates above --max-score -1.5, --skip-top 0): nothing written to" in err, err
    assert not (tmp_path / "none.tsv").exists()


def test_an_empty_file_and_a_run_of_another_kind_are_exit_2(reviews, retrieval_run, tmp_path, capsys):
    empty = tmp_path / "empty.tsv"
    empty.write_text("\n")
    out = tmp_path / "out.tsv"
    assert x_script(["mine_negatives", str(retrieval_run), str(empty), str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (f"x-script mine_negatives: error: {empty}: no training pair in it (an empty file): give a TSV of "
                   "query<TAB>positive rows\n"), err
    classifier = tmp_path / "run"
    assert run_chain(["x-train", str(write_config(tmp_path / "t.json", reviews, classifier, max_update=1,
                                                  eval_interval=1))]) == 0
    capsys.readouterr()
    assert x_script(["mine_negatives", str(classifier), str(SAMPLE / "train.tsv"), str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"x-script mine_negatives: error: {classifier} is a ") and err.endswith(
        " run: mine_negatives embeds with a bi-encoder (model bi_encoder or bert_bi_encoder, or head: bi_encoder)\n"), err
    assert err.count("\n") == 1
    assert not out.exists()


def test_pick_negatives_by_hand():
    # one query "q" (vector e0); corpus cosines with it: p 1.0 (its positive), dup 0.98, a 0.9, b 0.5, q itself
    # 1.0, c -1.0
    corpus = ["p", "dup", "a", "b", "q", "c"]
    cosines = np.array([1.0, 0.98, 0.9, 0.5, 1.0, -1.0])
    corpus_vectors = np.stack([cosines, np.sqrt(1 - cosines ** 2)], axis=1)
    query_vectors = np.array([[1.0, 0.0]])
    positives = {"q": {"p"}}

    def pick(k: int, skip_top: int, max_score: float, ceiling: float | None = None,
             count: int = 1) -> tuple[dict[str, list[str]], int]:
        ceilings = None if ceiling is None else np.array([ceiling])
        return pick_negatives(query_vectors, corpus_vectors, ["q"], corpus, positives, k, skip_top, max_score,
                              ceilings, count)

    assert pick(6, 0, 0.95) == ({"q": ["a"]}, 1)  # p and q dropped as the positive and the query; dup too close
    assert pick(6, 0, 0.99) == ({"q": ["dup"]}, 0)
    assert pick(6, 1, 0.95) == ({"q": ["b"]}, 1)
    assert pick(6, 2, 0.95) == ({"q": ["c"]}, 1)
    assert pick(6, 3, 0.95) == ({}, 1)
    assert pick(3, 0, 0.95) == ({}, 1)  # the top 3 are p, q and dup
    # --negatives: the best usable ones in order; fewer when fewer are usable
    assert pick(6, 0, 0.99, count=2) == ({"q": ["dup", "a"]}, 0)
    assert pick(6, 1, 0.95, count=5) == ({"q": ["b", "c"]}, 1)
    # --margin: the query's ceiling (its positive's 1.0 less 0.2 = 0.8) drops dup and a too, below max-score
    assert pick(6, 0, 0.99, ceiling=0.8, count=2) == ({"q": ["b", "c"]}, 2)
    assert pick(6, 0, 0.95, ceiling=0.99) == ({"q": ["a"]}, 1)  # the lower of the two thresholds holds


def test_several_negatives_under_a_margin(retrieval_run, tmp_path, capsys):
    """--negatives 2 --margin 0.05: up to two lines per pair, distinct negatives, each scoring at least 0.05 below
    the query's positives by the run's own embeddings; the message names both thresholds."""
    out = tmp_path / "triplets.tsv"
    assert x_script(["mine_negatives", str(retrieval_run), str(SAMPLE / "train.tsv"), str(out), "--k", "20",
                     "--max-score", "0.99", "--margin", "0.05", "--negatives", "2"]) == 0
    printed = capsys.readouterr().out
    assert "candidates above --max-score 0.99 or within --margin 0.05 of a positive dropped" in printed, printed
    rows = [line.split("\t") for line in out.read_text().splitlines()]
    by_pair: dict[tuple[str, str], list[str]] = {}
    for query, positive, negative, _score in rows:
        by_pair.setdefault((query, positive), []).append(negative)
    assert len(rows) > len(PAIRS) and all(1 <= len(n) <= 2 and len(set(n)) == len(n) for n in by_pair.values())
    loaded, _checkpoint = load_bi_encoder(str(retrieval_run), "<best>", None)
    texts = sorted({t for row in rows for t in row[:3]} | {p[1] for p in PAIRS})
    vectors = dict(zip(texts, embed_texts(loaded, texts, "test")))
    positives: dict[str, set[str]] = {}
    for query, positive, _score in PAIRS:
        positives.setdefault(query, set()).add(positive)
    for (query, _positive), negatives in by_pair.items():
        ceiling = min(float(vectors[query] @ vectors[p]) for p in positives[query]) - 0.05
        assert all(float(vectors[query] @ vectors[n]) <= ceiling + 1e-6 for n in negatives), query


def test_a_bad_margin_or_count_of_negatives_is_exit_2_and_writes_nothing(retrieval_run, tmp_path, capsys):
    out = tmp_path / "out.tsv"
    for flags, message in ((["--negatives", "0"], "--negatives 0: must be > 0."),
                           (["--margin", "wide"], "--margin 'wide': not a number.")):
        assert x_script(["mine_negatives", str(retrieval_run), str(SAMPLE / "train.tsv"), str(out), *flags]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"x-script mine_negatives: error: {message}") and err.count("\n") == 1, err
        assert not out.exists()
