"""``x-script search INDEX_DIR [QUERY ...] [--queries FILE] [--k 10]``: the k nearest texts of each query in
an index written by x-script build_index.

The queries (the words after INDEX_DIR, each one query, and the lines of ``--queries``) are embedded with
the run and checkpoint that built the index, each on its own, then searched (inner product of the
normalised embeddings: the cosine similarity). Printed, tab-separated, with a header: the query's number,
the query, the rank (1 = nearest), the id of the text in the index (its line number in build_index's TEXTS,
minus 1), the score and the text (TSV-escaped). Nothing is written. The index is searched as it was built
(x-script build_index ``--index``, ``--quantize``): an approximate index may return fewer than k texts
(an IVF search that probed too few clusters), a binary one scores by Hamming distance (1 - 2 hamming / dim).
"""

from __future__ import annotations

import os

from xdpx import io
from xdpx.command import script
from xdpx.config.errors import ConfigError
from xdpx.errors import UserError
from xdpx.io.tsv_cells import escape
from xdpx.scripts.build_index import embed_texts, load_bi_encoder, read_texts
from xdpx.scripts.result_tables import number_flag, split_flags

USAGE = "usage: x-script search INDEX_DIR [QUERY ...] [--queries FILE] [--k 10]"


@script("search")
def main(argv: list[str]) -> int:
    """The k nearest texts of each query in an x-script build_index folder (ids, scores, texts)."""
    # lazy: the index modules wait for a run; x-script --help imports every tool
    from xdpx.runtime.vector_index import load_index

    positional, flags = split_flags(argv, {"queries": None, "k": "10"}, USAGE)
    if not positional:
        raise ConfigError([USAGE])
    folder, queries = positional[0], list(positional[1:])
    k = int(number_flag(flags, "k", USAGE, low=0))
    if flags["queries"] is not None:
        queries += read_texts(str(flags["queries"]), None)
    queries = [q.strip() for q in queries if q.strip()]
    if not queries:
        raise UserError(f"no query: give them after the index folder or in a file with --queries. {USAGE}")
    stored = load_index(folder)
    save_dir, checkpoint = stored.facts["save_dir"], stored.facts["checkpoint"]
    if not io.exists(checkpoint):
        relative = not io.is_remote(checkpoint) and not os.path.isabs(checkpoint)
        raise UserError(f"{folder} was built with {checkpoint}, which is gone" + (
            f" (a path relative to the folder build_index ran in, not found from {os.getcwd()}: run search "
            "there)" if relative else "") + ": build the index again")
    predictor, _ = load_bi_encoder(save_dir, checkpoint, None)
    embedded = embed_texts(predictor, queries, "search")
    if embedded.shape[1] != stored.index.dim:  # type: ignore[attr-defined]
        raise UserError(f"{folder} holds vectors of dim {stored.index.dim}, but run {save_dir} ({checkpoint}) "
                        f"embeds in dim {embedded.shape[1]}: the run was trained again after build_index; "  # type: ignore[attr-defined]
                        "build the index again")
    scores, ids = stored.index.search(embedded, k)
    print("query_number\tquery\trank\tid\tscore\ttext")
    for number, (query, row_scores, row_ids) in enumerate(zip(queries, scores, ids)):
        for rank, (score, i) in enumerate(((s, i) for s, i in zip(row_scores, row_ids) if i >= 0), start=1):
            print(f"{number}\t{escape(query)}\t{rank}\t{i}\t{score:.6g}\t{escape(stored.texts[int(i)])}")
    return 0
