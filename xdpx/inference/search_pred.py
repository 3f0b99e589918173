"""x-pred with ``search_corpus``: retrieve (and with ``rerank``, rerank) the texts of a corpus for every
query line of each input, with the bi-encoder run of save_dir (xdpx/inference/retrieve.py).

Each output is a TSV with a header: ``query_number`` (the query's 0-based line among the input's queries),
``query``, ``rank`` (1 = best; with ``rerank_weight`` below 1, by the fusion of both stages' scores), ``id``
(the text's line in search_corpus minus 1), ``score`` (the bi-encoder's cosine), with ``rerank``:
``rerank_score`` (the reranker's log-odds of relevance) and ``first_stage_rank``, then ``text``; texts escaped
as x-pred's other outputs (xdpx/inference/outputs.py). Written whole at the end.
"""

from __future__ import annotations

from typing import Any

from xdpx import io
from xdpx.config.errors import ConfigError
from xdpx.config.options import Args
from xdpx.inference.loading import load_model
from xdpx.inference.rerank import Reranker
from xdpx.inference.rerank_options import search_problems
from xdpx.inference.retrieve import Retriever, read_lines
from xdpx.io.credentials import redact
from xdpx.io.tsv_cells import escape
from xdpx.runtime import distributed


def check_search(args: Args, run_args: Args) -> list[tuple[str, list[str], str]]:
    """(input, its queries, output) of each predict_file_map entry, every file read and checked before a
    model loads; ConfigError (exit 2) naming the key or the file and line."""
    problems = search_problems(args, run_args)
    if problems:
        raise ConfigError(problems)
    where = args.source("predict_file_map")
    read_lines(args.search_corpus, "corpus texts")  # a bad corpus is refused before the model loads
    out = []
    for name, output in args.predict_file_map.items():
        if not io.is_writable(output):
            raise ConfigError(f"{where}: key 'predict_file_map': cannot write the output {redact(output)!r}")
        out.append((name, read_lines(name, "queries"), output))
    return out


def search_command(args: Args, run_args: Args, dry: bool) -> None:
    """x-pred's run with search_corpus (or rerank, which needs it): check, then search unless ``dry``."""
    inputs = check_search(args, run_args)
    if dry:
        for name, queries, output in inputs:
            print(redact(f"# {name} ({len(queries)} queries) -> {output}: the top {args.search_k} of "
                         f"{args.search_corpus}" + (f", reranked by {args.rerank}" if args.get("rerank") else "")))
        return
    if distributed.current().is_main:  # one process searches and writes (under torchrun the others wait)
        search_inputs(args, run_args, inputs)
    distributed.barrier(distributed.current())


def search_inputs(args: Args, run_args: Args, inputs: list[tuple[str, list[str], str]]) -> None:
    """Embed search_corpus, search (and rerank) each input's queries, write each output."""
    loaded = load_model(args, run_args)
    reranker = Reranker.load(args.rerank, None, args.batch_size) if args.get("rerank") else None
    corpus = read_lines(args.search_corpus, "corpus texts")
    retriever = Retriever(loaded, corpus, reranker, rerank_weight=args.rerank_weight)
    fused = f" (fused with the cosines, rerank_weight {args.rerank_weight})" if args.rerank_weight != 1.0 else ""
    print(f"x-pred: {len(corpus)} corpus texts of {redact(args.search_corpus)} embedded"
          + (f"; reranking the top {args.rerank_k} with {redact(args.rerank)}{fused}" if reranker else ""))
    for name, queries, output in inputs:
        hits = retriever.search(queries, args.search_k, args.rerank_k if reranker else None)
        columns = ["query_number", "query", "rank", "id", "score"] + (["rerank_score", "first_stage_rank"]
                                                                      if reranker else []) + ["text"]
        lines = ["\t".join(columns)] if args.header else []
        for number, (query, found) in enumerate(zip(queries, hits)):
            for h in found:
                cells: list[Any] = [number, escape(query), h["rank"], h["id"], f"{h['score']:.6g}"]
                if reranker:
                    cells += [f"{h['rerank_score']:.6g}", h["first_stage_rank"]]
                lines.append("\t".join(str(c) for c in [*cells, escape(h["text"])]))
        with io.open(output, "w") as f:
            f.write("\n".join(lines) + "\n")
        print(redact(f"x-pred {name}: {len(queries)} queries, {sum(len(h) for h in hits)} hits -> {output}"))
