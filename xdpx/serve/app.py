"""The x-serve routes as a Starlette app: POST /predict, POST /embed (bi-encoder runs), GET /health, /ready,
/metrics, /openapi.json, /docs, and GET / (a page to try the model) with GET /info (the run it serves).

Starlette rather than FastAPI: the body of /predict must be read under a size limit and parsed with
limits on depth and number length *before* anything validates it, which FastAPI's declared bodies
(parsed whole by json.loads, then validated by pydantic) would do after the fact; what FastAPI adds
on top (pydantic models, generated docs pages) is not needed for five routes, and its OpenAPI document
is replaced by the hand-written one of openapi.py.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from xdpx.models.choice import model_label
from xdpx.serve.answering import answer_inputs
from xdpx.serve.batching import Batcher
from xdpx.serve.embedding import embed_inputs, serves_embeddings
from xdpx.serve.explaining import explain_batcher, explain_route
from xdpx.serve.limits import Limits
from xdpx.serve.metrics import Metrics, MetricsMiddleware
from xdpx.serve.model_thread import model_thread, run_in
from xdpx.serve.openapi import docs_page, openapi_document
from xdpx.serve.page import page_response, run_info
from xdpx.serve.predictor import load_for_serving
from xdpx.serve.search import search_route


class JSON(JSONResponse):
    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return JSON({"error": message}, status_code=status, headers=headers)


class State:
    """What the routes share: the predictor, the batcher, the limits, the metrics and the counts."""

    def __init__(self, predictor: Any, limits: Limits, batch_size: int, max_wait: float, max_queue: int,
                 executor: Any = None) -> None:
        self.predictor, self.limits = predictor, limits
        self.metrics = Metrics(predictor)
        self.batcher = Batcher(predictor.predict_inputs, batch_size, max_wait, max_queue, self.metrics.batch,
                               executor)
        # POST /embed (a bi-encoder run): texts embedded one by one, batched like /predict's inputs
        self.embedder = Batcher(partial(embed_inputs, predictor), batch_size, max_wait, max_queue,
                                self.metrics.batch, executor) if serves_embeddings(predictor) else None
        # POST /explain: token attributions, in the same model thread (xdpx/serve/explaining.py)
        self.explainer = explain_batcher(predictor, max_wait, max_queue, self.metrics.batch, executor)
        self.answered = 0  # /predict requests answered 200 (printed when the server stops)


def create_app(predictor: Any, limits: Limits | None = None, batch_size: int | None = None,
               max_wait: float = 0.002, max_queue: int = 2048, executor: Any = None, searcher: Any = None) -> Any:
    """The ASGI app serving ``predictor`` (xdpx.serve.predictor.Predictor), wrapped in the metrics;
    ``executor``: the single thread that loaded the predictor (xdpx/serve/model_thread.py), to predict in;
    ``searcher``: the Retriever of POST /search (x-serve --corpus, xdpx/serve/search.py), or None."""
    limits = limits or Limits()
    state = State(predictor, limits, batch_size or predictor.loaded.batch_size, max_wait, max_queue, executor)
    state.searcher = searcher
    schema = openapi_document(limits, predictor.labels, embeds=state.embedder is not None,
                              searches=searcher is not None, reranks=getattr(searcher, "reranker", None) is not None)

    async def predict(request: Request, batcher: Any = None) -> Response:
        # While the server drains after SIGTERM, requests on open connections are still served. The inputs
        # are encoded in the model thread, not here: tokenizing on the event loop while the model computed
        # halved the requests/s of MiniLM on 2 cores (docs/benchmarks.md, x-serve).
        answers = await answer_inputs(request, state, batcher or state.batcher, error, "prediction")
        if isinstance(answers, Response):
            return answers
        state.answered += 1
        return JSON(answers)

    async def embed(request: Request) -> Response:
        if state.embedder is None:
            return error(404, f"POST /embed serves bi-encoder runs (model bi_encoder or bert_bi_encoder); this run "
                              f"is a {model_label(predictor.loaded.run_args)}: use POST /predict")
        return await predict(request, state.embedder)

    async def health(request: Request) -> Response:
        return JSON({"status": "ok", **predictor.describe()})

    async def ready(request: Request) -> Response:
        if not state.batcher.running():
            return error(503, "the batcher is not running: predictions cannot be answered")
        return JSON({"status": "ready", "queued_samples": state.batcher.queued})

    async def metrics(request: Request) -> Response:
        body, content_type = state.metrics.render()
        return Response(body, media_type=content_type)

    async def openapi(request: Request) -> Response:
        return JSON(schema)

    page = docs_page(schema)

    async def docs(request: Request) -> Response:
        return HTMLResponse(page)

    def info_of(request: Request) -> dict[str, Any]:
        # what this server answers: /embed of a bi-encoder, /search with a corpus (the page asks for no more)
        served = {route.path for route in request.app.routes} - (set() if state.embedder else {"/embed"}) \
            - (set() if getattr(state, "searcher", None) is not None else {"/search"})
        return run_info(predictor, sorted(served))

    async def try_page(request: Request) -> Response:  # GET /: a page to try the model (xdpx/serve/page.py)
        html, headers = page_response(info_of(request))
        return HTMLResponse(html, headers=headers)

    async def info(request: Request) -> Response:
        return JSON(info_of(request))

    async def not_found(request: Request, exc: Exception) -> Response:
        return error(404, f"no such path {request.url.path!r}: use POST /predict (/embed), GET /health, /ready, "
                          "/metrics, /openapi.json, /docs, /info or / (a page to try the model)")

    async def wrong_method(request: Request, exc: Exception) -> Response:
        return error(405, f"{request.method} {request.url.path} is not served (see GET /openapi.json)")

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        state.batcher.start()
        state.explainer.start()
        if state.embedder is not None:
            state.embedder.start()
        yield
        await state.batcher.stop()
        await state.explainer.stop()
        if state.embedder is not None:
            await state.embedder.stop()

    app = Starlette(routes=[Route("/predict", predict, methods=["POST"]), Route("/embed", embed, methods=["POST"]),
                            Route("/search", search_route(state, limits, JSON, error), methods=["POST"]),
                            Route("/explain", explain_route(state, JSON, error), methods=["POST"]),
                            Route("/health", health),
                            Route("/ready", ready), Route("/metrics", metrics), Route("/openapi.json", openapi),
                            Route("/docs", docs), Route("/", try_page), Route("/info", info)],
                    exception_handlers={404: not_found, 405: wrong_method}, lifespan=lifespan)
    wrapped = MetricsMiddleware(app, state.metrics)
    wrapped.state = state  # the runner reports state.answered when the server stops
    return wrapped


def app_from_environment() -> Any:
    """``uvicorn --factory xdpx.serve.app:app_from_environment``: the app of one worker process, its
    settings passed by the runner in XDPX_SERVE (JSON), each worker loading the model itself."""
    settings = json.loads(os.environ["XDPX_SERVE"])
    executor = model_thread()
    predictor = run_in(executor, partial(load_for_serving, backend=settings.get("backend")), settings["save_dir"],
                       settings["checkpoint"],
                       settings["batch_size"], settings["cpu"], settings["threads"], settings.get("max_tokens"),
                       settings.get("bf16", False), settings.get("trust_user_dir", False),
                       settings.get("raw_probs", False))
    return create_app(predictor, Limits(**settings["limits"]), settings["batch_size"], settings["max_wait"],
                      settings["max_queue"], executor)
