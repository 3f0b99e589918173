"""x-serve's POST /search: retrieve, then rerank (xdpx/inference/retrieve.py).

``x-serve BI_ENCODER_RUN --port 8080 --corpus texts.txt [--reranker CROSS_ENCODER_RUN]`` embeds the corpus at
start (one text a line, the first tab-separated column; its id is the line number minus 1, as x-script
build_index numbers them). ``--corpus INDEX_FOLDER`` (what x-script build_index wrote: exact, hnsw or ivf;
float32, int8 or binary) searches that index instead, embedding nothing at start; it must have been built
with the served run's checkpoint (index.json records it), else x-serve refuses to start (exit 2). A request is a JSON object ``{"query": "a text", "k": 10, "rerank": 50}``: ``k``
(default 10) hits by the bi-encoder's cosine, or with ``rerank`` (needs --reranker) the first ``rerank`` hits
ordered again by the reranker and the best ``k`` of them. The answer is ``{"query", "k", "rerank", "hits"}``,
each hit ``{"rank", "id", "text", "score"}`` plus, reranked, ``rerank_score`` (the reranker's log-odds of
relevance) and ``first_stage_rank``; with ``--rerank-weight W`` below 1 (server-wide) the reranked hits are
ordered by the fusion of both stages' scores (xdpx/inference/rerank.py fuse_scores). A body that is not such
an object is 400 (not JSON) or 422 (the field and why); a server started without --corpus answers 404.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from xdpx import io
from xdpx.config.errors import ConfigError
from xdpx.config.options import Args
from xdpx.config.writers import ARGS_FILE, read_args
from xdpx.data.errors import BadLine
from xdpx.data.loading import check_text
from xdpx.errors import UserError
from xdpx.inference import Reranker, Retriever, read_lines, reranker_problem
from xdpx.models.choice import model_label
from xdpx.runtime.vector_index import load_index
from xdpx.serve.embedding import serves_embeddings
from xdpx.serve.limits import Limits, RequestError, read_body

MAX_HITS = 1000  # the largest k or rerank of a request: the work of one request stays bounded
FIELDS = ("query", "k", "rerank")


def load_searcher(predictor: Any, corpus: str, reranker: str | None, batch_size: int | None = None,
                  rerank_weight: float = 1.0) -> Retriever:
    """The Retriever of x-serve's --corpus (and --reranker, --rerank-weight); ConfigError (exit 2) for a run
    of the wrong kind or a bad corpus file, before the corpus is embedded."""
    if not serves_embeddings(predictor):
        raise ConfigError(f"--corpus: POST /search embeds queries with a bi-encoder run, and this run is a "
                          f"{model_label(predictor.loaded.run_args)}")
    index = None
    if io.isdir(corpus):  # an index folder of x-script build_index
        index, texts = served_index(predictor, corpus)
    else:
        texts = read_lines(corpus, "corpus texts")
    model = None
    if reranker is not None:
        if not io.exists(io.join(reranker, ARGS_FILE)):
            raise ConfigError(f"--reranker: {reranker!r} has no {ARGS_FILE}: give the x-train run directory of a "
                              "cross-encoder")
        problem = reranker_problem(Args(read_args(io.join(reranker, ARGS_FILE)), {}, set(), {}),
                                   f"--reranker {reranker}")
        if problem:
            raise ConfigError(problem)
        model = Reranker.load(reranker, None, batch_size)
    return Retriever(predictor.loaded, texts, model, index, rerank_weight=rerank_weight)


def served_index(predictor: Any, folder: str) -> tuple[Any, list[str]]:
    """(the index, its texts) of an index folder built with the served run's checkpoint; ConfigError for a
    folder that is not an index, or one built with another run or checkpoint (its vectors would not be
    comparable with the served model's query embeddings)."""
    try:
        stored = load_index(folder)
    except UserError as e:
        raise ConfigError(f"--corpus: {e}") from None
    built_with = stored.facts.get("checkpoint")
    served = predictor.loaded.checkpoint
    if not built_with or served is None or io.abspath(str(served)) != built_with:
        raise ConfigError(f"--corpus: the index {folder} was built with {built_with or 'an unrecorded checkpoint'} "
                          f"(run {stored.facts.get('save_dir')}), and x-serve serves "
                          f"{io.abspath(str(served)) if served else 'another model'}: its vectors are another "
                          "model's; build it with this run (x-script build_index RUN TEXTS FOLDER) or serve that "
                          "run and checkpoint")
    return stored.index, stored.texts


def parse_search(body: bytes, limits: Limits) -> tuple[str, int, int | None]:
    """(query, k, rerank) of a /search body; RequestError 400 (not JSON) or 422 (a field, and why)."""
    try:
        value = json.loads(body.decode("utf-8"), parse_constant=lambda name: None)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise RequestError(400, f"the body is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise RequestError(422, 'send a JSON object: {"query": "a text", "k": 10, "rerank": 50}')
    unknown = sorted(set(value) - set(FIELDS))
    if unknown:
        raise RequestError(422, f"unknown field(s) {unknown}: /search reads query, k, rerank")
    query = value.get("query")
    if not isinstance(query, str) or not query.strip():
        raise RequestError(422, "query: one non-empty text (a JSON string)")
    if len(query) > limits.max_text_chars:
        raise RequestError(422, f"query: {len(query)} characters; at most {limits.max_text_chars}")
    try:
        check_text(query.strip(), "query")
    except BadLine as e:
        raise RequestError(422, f"query: {e}") from None
    k, rerank = value.get("k", 10), value.get("rerank")
    for name, number in (("k", k), ("rerank", rerank)):
        if number is None and name == "rerank":
            continue
        if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= MAX_HITS:
            raise RequestError(422, f"{name}: an integer from 1 to {MAX_HITS}, got {number!r}")
    return query.strip(), k, rerank


def search_route(state: Any, limits: Limits, answer: Callable[..., Response],
                 error: Callable[..., Response]) -> Callable[[Request], Any]:
    """The handler of POST /search; ``state.searcher`` is the Retriever (None without --corpus)."""

    async def search(request: Request) -> Response:
        retriever = getattr(state, "searcher", None)
        if retriever is None:
            return error(404, "POST /search needs a corpus: start x-serve with a bi-encoder run and --corpus TEXTS "
                              "(and --reranker RUN to rerank)")
        try:
            query, k, rerank = parse_search(await read_body(request, limits), limits)
        except RequestError as e:
            return error(e.status, e.message, e.headers)
        except ClientDisconnect:
            return error(499, "the client closed the connection before its request body arrived")
        problem = retriever.check(k, rerank)
        if problem:
            return error(422, problem)

        def run() -> list[dict[str, Any]]:
            with state.predictor.lock:  # the bi-encoder is /predict's and /embed's model too: one pass at a time
                return retriever.search([query], k, rerank)[0]

        try:
            hits = await asyncio.get_running_loop().run_in_executor(None, run)
        except Exception as e:  # the model failed: say so, keep serving
            return error(500, f"search failed: {type(e).__name__}: {e}")
        return answer({"query": query, "k": k, "rerank": rerank, "hits": hits})

    return search
