"""The options of retrieve-then-rerank and their checks, apart from xdpx/inference/rerank.py (numpy, the
models) so that a command's start-up reads them without loading anything.

- x-eval: ``first_stage`` (a bi-encoder run) + ``rerank_k``: a cross-encoder run evaluated on a BEIR folder
  reranks the first stage's top ``rerank_k`` and reports both stages.
- x-pred: ``rerank`` (a cross-encoder run) + ``rerank_k`` with ``index`` (an x-script build_index folder):
  each query's top ``rerank_k`` of the index, reranked.
- both: ``rerank_weight`` w: with w < 1 the candidates are ordered by ``w * minmax(reranker scores) + (1 - w) *
  minmax(first-stage cosines)`` (xdpx/inference/rerank.py fuse_scores); 1 (the default): the reranker alone.
"""

from __future__ import annotations

from typing import Any

from xdpx import io
from xdpx.config.errors import ConfigError
from xdpx.config.options import Args, Option
from xdpx.config.ranges import at_least, in_range
from xdpx.config.writers import ARGS_FILE, read_args
from xdpx.models.choice import head_name, model_label


def weight_option(needs: str) -> Option:
    """``rerank_weight``: the same option in x-eval (``needs`` first_stage) and x-pred (rerank)."""
    return Option("rerank_weight", float, default=1.0, validate=in_range(0, 1),
                  doc=f"with {needs}: the reranker's share w of the order: each query's reranked candidates are "
                      "ordered by w * minmax(reranker scores) + (1 - w) * minmax(first-stage cosines), each min-max "
                      "normalised over the query's candidates (a constant list gives zeros), ties in the first-stage "
                      "order; 1: the reranker's order alone, 0: the first stage's. Below 1 when the reranker alone "
                      "does not beat the first stage (choose w on a dev BEIR folder with x-eval)")


FIRST_STAGE_OPTIONS: list[Any] = [
    Option("first_stage", str, default=None, path="input",
           doc="a cross-encoder (reranker) run evaluated on a BEIR folder: the bi-encoder run whose exact search "
               "of the corpus (its best checkpoint) gives the candidates to rerank; the row reports the first "
               "stage's metrics as first_stage.<metric> and the reranked ones beside them. null: no reranking"),
    Option("rerank_k", int, default=100, validate=at_least(1),
           doc="the candidates of each query the reranker orders again (the first stage's top rerank_k); the "
               "documents below keep their first-stage places"),
    weight_option("first_stage"),
]


def weight_problem(args: Any, needs: str) -> str | None:
    """rerank_weight set (not 1) where nothing is reranked: one line naming the key (None when fine)."""
    if args.is_default("rerank_weight") or args.get(needs):
        return None
    return (f"{args.source('rerank_weight')}: key 'rerank_weight': {args.rerank_weight} weighs a reranker's "
            f"scores against the first stage's, and {needs} is not set: set {needs} or remove rerank_weight")


def reranker_problem(run_args: Any, where: str) -> str | None:
    """Why the run of ``run_args`` cannot rerank (None when it can): a pair model with label 1 or a score."""
    if head_name(run_args) == "bi_encoder":
        return (f"{where} is a {model_label(run_args)} run (a bi-encoder): a reranker is a cross-encoder, a pair "
                "model (bert_pair) trained on labelled (query, passage) pairs")
    if run_args.get("loader") != "pair":
        return (f"{where} is a {model_label(run_args)} run on loader {run_args.get('loader')!r}: a reranker reads "
                "(query, passage) pairs (loader pair, model bert_pair)")
    return None


def first_stage_problem(save_dir: str, where: str) -> str | None:
    """Why ``save_dir`` cannot be the first stage of a reranking (None when it can: a bi-encoder run)."""
    if not io.exists(io.join(save_dir, ARGS_FILE)):
        return f"{where}: {save_dir!r} has no {ARGS_FILE}: the first stage is a bi-encoder's x-train run directory"
    run_args = Args(read_args(io.join(save_dir, ARGS_FILE)), {}, set(), {})
    if head_name(run_args) != "bi_encoder":
        return (f"{where}: {save_dir!r} is a {model_label(run_args)} run: the first stage retrieves with a bi-encoder "
                "(model bi_encoder or bert_bi_encoder)")
    return None


def reranking(args: Any, run_args: Any) -> bool:
    """Whether this x-eval reranks (``first_stage`` set); ConfigError for a run or first stage of the wrong
    kind, before anything loads."""
    where = args.source("first_stage")
    problem = weight_problem(args, "first_stage")
    if problem:
        raise ConfigError(problem)
    if not args.get("first_stage"):
        return False
    problem = reranker_problem(run_args, f"{args.source('save_dir')}: key 'save_dir': {args.save_dir}")
    if problem:
        raise ConfigError(f"{problem}; first_stage names the bi-encoder of a cross-encoder's evaluation")
    problem = first_stage_problem(args.first_stage, f"{where}: key 'first_stage'")
    if problem:
        raise ConfigError(problem)
    return True


SEARCH_OPTIONS: list[Any] = [
    Option("search_corpus", str, default=None, path="input",
           doc="a bi-encoder run: a file of texts (one a line, the first tab-separated column; its id is the line "
               "number minus 1, as x-script build_index numbers them) that each line of each predict_file_map input "
               "searches as a query (exact cosine search); each output gets the hits: query_number, query, rank, "
               "id, score, [rerank_score, first_stage_rank,] text. null: predict embeddings as usual"),
    Option("search_k", int, default=10, validate=at_least(1), doc="with search_corpus: the hits written per query"),
    Option("rerank", str, default=None, path="input",
           doc="with search_corpus: a cross-encoder (reranker) run; each query's first rerank_k hits are ordered "
               "again by its score (rerank_score: the log-odds of label 1) and the best search_k written; null: the "
               "bi-encoder's order"),
    Option("rerank_k", int, default=100, validate=at_least(1),
           doc="with rerank: the first-stage hits the reranker orders (at least search_k)"),
    weight_option("rerank"),
]


def search_problems(args: Any, run_args: Any) -> list[str]:
    """x-pred's search_corpus / rerank / rerank_weight against the runs, before anything loads (one line each)."""
    weight = weight_problem(args, "rerank")  # None whenever rerank is set
    problems = [weight] if weight else []
    if not args.get("search_corpus"):
        if args.get("rerank"):
            problems.append(f"{args.source('rerank')}: key 'rerank': a reranker orders the hits of search_corpus: "
                            "set search_corpus (the texts to search) or rerank: null")
        return problems
    where = args.source("search_corpus")
    if head_name(run_args) != "bi_encoder":
        problems.append(f"{where}: key 'search_corpus': the queries are embedded by save_dir's run, and "
                        f"{args.save_dir} is a {model_label(run_args)} run: give a bi-encoder run")
    if args.get("binary"):
        problems.append(f"{where}: key 'search_corpus': the hits are written as TSV: set binary: false")
    if args.get("rerank"):
        if not io.exists(io.join(args.rerank, ARGS_FILE)):
            problems.append(f"{args.source('rerank')}: key 'rerank': {args.rerank!r} has no {ARGS_FILE}: give the "
                            "x-train run directory of a cross-encoder")
        else:
            problem = reranker_problem(Args(read_args(io.join(args.rerank, ARGS_FILE)), {}, set(), {}),
                                       f"{args.source('rerank')}: key 'rerank': {args.rerank}")
            if problem:
                problems.append(problem)
        if args.rerank_k < args.search_k:
            problems.append(f"{args.source('rerank_k')}: key 'rerank_k': {args.rerank_k} is below search_k "
                            f"({args.search_k}): the reranker orders at least the hits written")
    return problems
