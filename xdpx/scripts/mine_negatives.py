"""``x-script mine_negatives SAVE_DIR TRAIN_FILE OUT_FILE [--k 10] [--skip-top 0] [--max-score 0.95]
[--margin M] [--negatives 1] [--corpus FILE] [--corpus-column N] [--query-column 0] [--positive-column 1]
[--checkpoint <best>] [--batch-size 64]``: hard negatives mined with a bi-encoder run, written as a triplet
training file.

TRAIN_FILE is a TSV of training pairs (query in ``--query-column``, its positive in ``--positive-column``,
any other columns, e.g. a score, kept). The corpus is the distinct positives of TRAIN_FILE, or the texts of
``--corpus`` (one per line, or column ``--corpus-column`` of a TSV). Every corpus text and every distinct
query is embedded on its own with the run (as build_index does), and each query ranks the corpus by cosine;
of its top ``--k`` the query's own positives (every positive it has in TRAIN_FILE), the query's own text
and the near-duplicates scoring above ``--max-score`` are dropped, and with ``--margin M`` every candidate
scoring above the query's lowest positive's score less M (a relative ceiling, as sentence-transformers'
mine_hard_negatives has: on paraphrase data the nearest "negatives" are often unlabelled positives, which
hurt a cross-encoder most), the ``--skip-top`` best of the rest are skipped, and the best ``--negatives``
(1) remaining are the hard negatives of each of the query's pairs: one line per pair and negative.
OUT_FILE gets ``query<TAB>positive<TAB>negative`` then the pair's other columns: what x-prepro reads with
``loader: triplet`` (a train file without a label column gives three columns: use ``label_column: null``). A pair whose query has no usable negative is left out and counted.
OUT_FILE is written at once at the end (atomically): a failure leaves nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xdpx import io
from xdpx.command import script
from xdpx.config.errors import ConfigError
from xdpx.config.options import Args
from xdpx.config.writers import ARGS_FILE, read_args
from xdpx.errors import UserError
from xdpx.models.choice import head_name, model_label
from xdpx.scripts.build_index import embed_texts, load_bi_encoder, read_texts
from xdpx.scripts.result_tables import check_writable, number_flag, split_flags, write_text

USAGE = ("usage: x-script mine_negatives SAVE_DIR TRAIN_FILE OUT_FILE [--k 10] [--skip-top 0] [--max-score 0.95] "
         "[--margin M] [--negatives 1] [--corpus FILE] [--corpus-column N] [--query-column 0] [--positive-column 1] "
         "[--checkpoint <best>] [--batch-size 64]")


@dataclass
class Pairs:
    """The rows of a training file: the cells of each, and the positives of each distinct query."""

    rows: list[list[str]] = field(default_factory=list)
    positives: dict[str, set[str]] = field(default_factory=dict)


def read_pairs(path: str, query_column: int, positive_column: int) -> Pairs:
    """The pairs of ``path``; ConfigError (exit 2) for a missing or empty file or a row without the columns."""
    if not io.exists(path):
        raise ConfigError(f"{path} does not exist: give a TSV of training pairs (query<TAB>positive)")
    pairs = Pairs()
    with io.open(path) as f:
        for number, line in enumerate(f, start=1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            cells = line.split("\t")
            if max(query_column, positive_column) >= len(cells):
                raise ConfigError(f"{path}:{number}: {len(cells)} column(s), no query in column {query_column} and "
                                  f"positive in column {positive_column} (--query-column, --positive-column count "
                                  "from 0)")
            query, positive = cells[query_column].strip(), cells[positive_column].strip()
            if not query or not positive:
                raise ConfigError(f"{path}:{number}: an empty {'query' if not query else 'positive'}: every pair needs "
                                  "both texts")
            pairs.rows.append(cells)
            pairs.positives.setdefault(query, set()).add(positive)
    if not pairs.rows:
        raise ConfigError(f"{path}: no training pair in it (an empty file): give a TSV of query<TAB>positive rows")
    return pairs


def check_run(save_dir: str) -> None:
    """ConfigError (exit 2, before the model loads) for a folder that is not a bi-encoder run."""
    origin = io.join(save_dir, ARGS_FILE)
    if not io.exists(origin):
        raise ConfigError(f"{save_dir} has no {ARGS_FILE}: it is not a run directory of x-train")
    run_args = Args(read_args(origin), {}, set(), {})
    if head_name(run_args) != "bi_encoder":
        raise ConfigError(f"{save_dir} is a {model_label(run_args)} run: mine_negatives embeds with a bi-encoder "
                          "(model bi_encoder or bert_bi_encoder, or head: bi_encoder)")


def read_corpus(path: str, column: int | None) -> list[str]:
    """The texts of ``--corpus``, distinct, in file order; a text with a tab cannot go into a TSV cell."""
    texts = read_texts(path, column)
    for number, text in enumerate(texts, start=1):
        if "\t" in text:
            raise ConfigError(f"{path}:{number}: a tab inside a corpus text: the triplet file is tab-separated; "
                              "give the column of the text with --corpus-column N")
    return list(dict.fromkeys(texts))


def pick_negatives(query_vectors: Any, corpus_vectors: Any, queries: list[str], corpus: list[str],
                   positives: dict[str, set[str]], k: int, skip_top: int, max_score: float,
                   ceilings: Any = None, count: int = 1) -> tuple[dict[str, list[str]], int]:
    """The hard negative of each query that has one, and how many candidates scored above ``max_score`` or
    the query's own ceiling (``ceilings[i]``: its lowest positive's score less the margin; None: no ceiling)
    (the vectors: numpy ``[N, D]``, normalised)."""
    negatives: dict[str, list[str]] = {}
    too_close = 0
    k = min(k, len(corpus))
    for start in range(0, len(queries), 256):  # memory: [256, corpus] scores at a time
        scores = query_vectors[start: start + 256] @ corpus_vectors.T
        top = np.argsort(-scores, axis=1, kind="stable")[:, :k]  # equal scores: the earlier corpus text first
        for row, query in enumerate(queries[start: start + 256]):
            usable = []
            for i in top[row]:
                text = corpus[i]
                if text == query or text in positives[query]:
                    continue
                ceiling = max_score if ceilings is None else min(max_score, ceilings[start + row])
                if scores[row, i] > ceiling:
                    too_close += 1
                    continue
                usable.append(text)
            if len(usable) > skip_top:
                negatives[query] = usable[skip_top: skip_top + count]
    return negatives, too_close


@script("mine_negatives")
def main(argv: list[str]) -> int:
    """Mine a hard negative for each training pair with a bi-encoder run and write a triplet training file."""
    positional, flags = split_flags(argv, {"k": "10", "skip_top": "0", "max_score": "0.95", "corpus": None,
                                           "corpus_column": None, "query_column": "0", "positive_column": "1",
                                           "checkpoint": "<best>", "batch_size": None, "margin": None,
                                           "negatives": "1"}, USAGE)
    if len(positional) != 3:
        raise ConfigError([USAGE])
    save_dir, train_path, out_path = positional
    k = int(number_flag(flags, "k", USAGE, low=0))
    skip_top = int(number_flag(flags, "skip_top", USAGE, low=-1))
    max_score = number_flag(flags, "max_score", USAGE)
    count = int(number_flag(flags, "negatives", USAGE, low=0))
    margin = number_flag(flags, "margin", USAGE) if flags["margin"] is not None else None
    query_column = int(number_flag(flags, "query_column", USAGE, low=-1))
    positive_column = int(number_flag(flags, "positive_column", USAGE, low=-1))
    if query_column == positive_column:
        raise ConfigError([f"--query-column and --positive-column are both {query_column}: name two columns"])
    corpus_column = (int(number_flag(flags, "corpus_column", USAGE, low=-1)) if flags["corpus_column"] is not None
                     else None)
    batch_size = int(number_flag(flags, "batch_size", USAGE, low=0)) if flags["batch_size"] is not None else None
    inputs = [("SAVE_DIR", save_dir), ("TRAIN_FILE", train_path)]
    if flags["corpus"] is not None:
        inputs.append(("--corpus", str(flags["corpus"])))
    check_writable("mine_negatives", [("OUT_FILE", out_path)], inputs)
    # every input checked before the model loads: a bad one costs nothing and writes nothing
    pairs = read_pairs(train_path, query_column, positive_column)
    corpus = (read_corpus(str(flags["corpus"]), corpus_column) if flags["corpus"] is not None
              else list(dict.fromkeys(cells[positive_column].strip() for cells in pairs.rows)))
    check_run(save_dir)
    predictor, checkpoint = load_bi_encoder(save_dir, str(flags["checkpoint"]), batch_size)
    started = time.time()
    queries = list(pairs.positives)
    corpus_vectors = embed_texts(predictor, corpus, "mine_negatives")
    query_vectors = embed_texts(predictor, queries, "mine_negatives")
    ceilings = None
    if margin is not None:  # each query's ceiling: its lowest positive's score less the margin
        vector_of = dict(zip(corpus, corpus_vectors))  # the positives the corpus holds are embedded already
        missing = list(dict.fromkeys(p for q in queries for p in sorted(pairs.positives[q]) if p not in vector_of))
        if missing:
            vector_of.update(zip(missing, embed_texts(predictor, missing, "mine_negatives")))
        ceilings = np.array([min(float(query_vectors[i] @ vector_of[p]) for p in pairs.positives[q])
                             for i, q in enumerate(queries)]) - margin
    negatives, too_close = pick_negatives(query_vectors, corpus_vectors, queries, corpus, pairs.positives, k,
                                          skip_top, max_score, ceilings, count)
    lines, without = [], 0
    for cells in pairs.rows:
        query, positive = cells[query_column].strip(), cells[positive_column].strip()
        if query not in negatives:
            without += 1
            continue
        rest = [cell for i, cell in enumerate(cells) if i not in (query_column, positive_column)]
        lines.extend("\t".join([query, positive, negative, *rest]) + "\n" for negative in negatives[query])
    source = f"--corpus {flags['corpus']}" if flags["corpus"] is not None else "the positives of TRAIN_FILE"
    threshold = f"--max-score {max_score:g}" + (f" or within --margin {margin:g} of a positive" if margin is not None
                                                 else "")
    print(f"mine_negatives: {len(pairs.rows)} pairs, {len(queries)} distinct queries; corpus {len(corpus)} texts "
          f"({source}); checkpoint {checkpoint}")
    if not lines:
        raise UserError(f"{train_path}: no pair has a usable negative among the top {k} (positives dropped, "
                          f"{too_close} candidates above {threshold}, --skip-top {skip_top}): nothing "
                          f"written to {out_path}; raise --k or --max-score, or give a larger --corpus")
    write_text("mine_negatives", out_path, "".join(lines))
    print(f"mine_negatives: {len(lines)} triplets (query, positive, hard negative) -> {out_path}; {without} pairs "
          f"without a usable negative in the top {k} (left out); {too_close} candidates above {threshold} "
          f"dropped; {time.time() - started:.1f}s")
    return 0
