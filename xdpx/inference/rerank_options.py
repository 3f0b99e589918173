"""The options of retrieve-then-rerank and their checks, apart from xdpx/inference/rerank.py (numpy, the
models) so that a command's start-up reads them without loading anything.

- x-eval: ``first_stage`` (a bi-encoder run) + ``rerank_k``: a cross-encoder run evaluated on a BEIR folder
  reranks the first stage's top ``rerank_k`` and reports both stages.
- x-pred: ``rerank`` (a cross-encoder run) + ``rerank_k`` with ``index`` (an x-script build_index folder):
  each query's top ``rerank_k`` of the index, reranked.
"""

from __future__ import annotations

from typing import Any

from xdpx import io
from xdpx.config.errors import ConfigError
from xdpx.config.options import Args, Option
from xdpx.config.ranges import at_least
from xdpx.config.writers import ARGS_FILE, read_args
from xdpx.models.choice import head_name, model_label

FIRST_STAGE_OPTIONS: list[Any] = [
    Option("first_stage", str, default=None, path="input",
           doc="a cross-encoder (reranker) run evaluated on a BEIR folder: the bi-encoder run whose exact search "
               "of the corpus (its best checkpoint) gives the candidates to rerank; the row reports the first "
               "stage's metrics as first_stage.<metric> and the reranked ones beside them. null: no reranking"),
    Option("rerank_k", int, default=100, validate=at_least(1),
           doc="the candidates of each query the reranker orders again (the first stage's top rerank_k); the "
               "documents below keep their first-stage places"),
]


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
    if not args.get("first_stage"):
        return False
    problem = reranker_problem(run_args, f"{args.source('save_dir')}: key 'save_dir': {args.save_dir}")
    if problem:
        raise ConfigError(f"{problem}; first_stage names the bi-encoder of a cross-encoder's evaluation")
    problem = first_stage_problem(args.first_stage, f"{where}: key 'first_stage'")
    if problem:
        raise ConfigError(problem)
    return True
