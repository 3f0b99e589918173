"""``x-script rerank_pairs TRIPLETS OUT_FILE [--query-column 0] [--positive-column 1] [--negative-column 2]``:
the labelled (query, passage) pairs a cross-encoder reranker trains on, from a triplet file.

TRIPLETS is a TSV with a query, its positive and a hard negative per line: what x-script mine_negatives
writes (other columns are ignored). OUT_FILE gets ``query<TAB>passage<TAB>label`` lines: ``1`` for each
distinct (query, positive), ``0`` for each distinct (query, negative), in the order they first appear (a
positive, then its line's negative), which x-prepro reads with ``loader: pair`` and ``processor: bert_pair``
for a ``bert_pair`` run with ``loss: cross_entropy`` (examples/retrieval/prepro_rerank_bert.hjson). A
passage that is both a positive and a negative of the same query (an unlabelled positive the mining took)
is kept as a positive only, and counted. A bad line (too few columns, an empty text) is one line naming
file and line, exit 2, nothing written; OUT_FILE is written whole at the end.
"""

from __future__ import annotations

from xdpx import io
from xdpx.command import script
from xdpx.config.errors import ConfigError
from xdpx.scripts.result_tables import check_writable, split_flags, write_text

USAGE = ("usage: x-script rerank_pairs TRIPLETS OUT_FILE [--query-column 0] [--positive-column 1] "
         "[--negative-column 2]")


def column_flag(flags: dict[str, str | None], name: str) -> int:
    raw = flags[name]
    if raw is None or not raw.isdigit():
        raise ConfigError([f"--{name.replace('_', '-')} {raw!r}: a column number counted from 0. {USAGE}"])
    return int(raw)


def labelled_pairs(path: str, columns: tuple[int, int, int]) -> tuple[list[tuple[str, str, str]], int]:
    """The distinct (query, passage, label) of a triplet file, and how many negatives were positives too."""
    if not io.exists(path):
        raise ConfigError(f"{path} does not exist: give a triplet TSV (query<TAB>positive<TAB>negative), as "
                          "x-script mine_negatives writes")
    positives: set[tuple[str, str]] = set()
    negatives: set[tuple[str, str]] = set()
    seen: dict[tuple[str, str], None] = {}  # every pair in the order it first appears
    with io.open(path) as f:
        for number, line in enumerate(f, start=1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            cells = line.split("\t")
            if max(columns) >= len(cells):
                raise ConfigError(f"{path}:{number}: {len(cells)} column(s), no query, positive and negative in "
                                  f"columns {list(columns)} (--query-column, --positive-column, --negative-column)")
            query, positive, negative = (cells[c].strip() for c in columns)
            for what, text in (("query", query), ("positive", positive), ("negative", negative)):
                if not text:
                    raise ConfigError(f"{path}:{number}: an empty {what}: every line needs its three texts")
            positives.add((query, positive))
            negatives.add((query, negative))
            seen.setdefault((query, positive), None)
            seen.setdefault((query, negative), None)
    if not positives:
        raise ConfigError(f"{path}: no triplet in it (an empty file)")
    rows = [(q, p, "1" if (q, p) in positives else "0") for q, p in seen]
    return rows, len(negatives & positives)


@script("rerank_pairs")
def main(argv: list[str]) -> int:
    """Labelled (query, passage, 1/0) pairs for a cross-encoder reranker from a triplet file (mine_negatives)."""
    positional, flags = split_flags(argv, {"query_column": "0", "positive_column": "1", "negative_column": "2"},
                                    USAGE)
    if len(positional) != 2:
        raise ConfigError([USAGE])
    source, out = positional
    columns = (column_flag(flags, "query_column"), column_flag(flags, "positive_column"),
               column_flag(flags, "negative_column"))
    if len(set(columns)) != 3:
        raise ConfigError([f"the query, positive and negative columns must differ, got {list(columns)}. {USAGE}"])
    check_writable("rerank_pairs", [("OUT_FILE", out)], [("TRIPLETS", source)])
    rows, both = labelled_pairs(source, columns)
    write_text("rerank_pairs", out, "".join(f"{q}\t{p}\t{label}\n" for q, p, label in rows))
    relevant = sum(1 for row in rows if row[2] == "1")
    print(f"rerank_pairs: {len(rows)} pairs ({relevant} labelled 1, {len(rows) - relevant} labelled 0)"
          + (f"; {both} negative(s) that are also the query's positive kept as positives" if both else "")
          + f" -> {out}")
    return 0
