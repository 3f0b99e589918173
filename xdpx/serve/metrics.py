"""Request metrics in Prometheus text format (prometheus-client), served at GET /metrics.

With several worker processes (``--workers N``) every worker writes its values to the folder named by
PROMETHEUS_MULTIPROC_DIR (the runner creates it) and /metrics adds them up across workers.
"""

from __future__ import annotations

import os
import time
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

ROUTES = ("/predict", "/health", "/ready", "/metrics", "/openapi.json", "/docs")
# The status a request is counted with when the client closed its connection before the answer (nginx's
# "client closed request"): the answer never left, and the server did nothing wrong.
CLIENT_CLOSED = 499
# A scope key the HTTP protocol (xdpx/serve/header_timeout.py) sets to the status it answered itself, without
# the app, while the app was reading the body (400 for a malformed chunked body): the status the client got.
SERVER_ANSWERED = "xdpx.server_answered"
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    """The server's counters and histograms, in a registry of its own (one per app)."""

    def __init__(self, predictor: Any = None) -> None:
        self.multiprocess = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
        # In multiprocess mode the values live in files; /metrics collects them into a fresh registry.
        self.registry = None if self.multiprocess else CollectorRegistry()
        where: dict[str, Any] = {"registry": self.registry} if self.registry is not None else {}
        self.requests = Counter("xdpx_serve_requests", "HTTP requests answered, by route and status",
                                ["route", "status"], **where)
        self.latency = Histogram("xdpx_serve_request_seconds", "Time from request to answer, by route",
                                 ["route"], buckets=LATENCY_BUCKETS, **where)
        self.samples = Counter("xdpx_serve_samples", "Inputs predicted", **where)
        self.batch_size = Histogram("xdpx_serve_batch_samples", "Samples per forward pass",
                                    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512), **where)
        self.refused = Counter("xdpx_serve_overloaded", "Requests refused with 503 because the queue was full",
                               **where)
        self.queued = Gauge("xdpx_serve_queued_samples", "Samples waiting or being predicted",
                            multiprocess_mode="livesum", **where)
        # what serves: 1 for the backend (pytorch, onnxruntime, pytorch-bf16) and precision (float32, int8,
        # bfloat16) of the model, so a dashboard never takes an int8 model for the float32 one
        self.model = Gauge("xdpx_serve_model", "The backend and precision serving (value 1)",
                           ["backend", "precision"], multiprocess_mode="max", **where)
        if predictor is not None:
            self.model.labels(getattr(predictor, "backend", "pytorch"), getattr(predictor, "precision", "float32")).set(1)

    def batch(self, size: int, seconds: float) -> None:
        self.samples.inc(size)
        self.batch_size.observe(size)

    def render(self) -> tuple[bytes, str]:
        if self.registry is not None:
            return generate_latest(self.registry), CONTENT_TYPE_LATEST
        from prometheus_client import multiprocess  # lazy: only with --workers

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST


class MetricsMiddleware:
    """Pure ASGI middleware: counts every answer by route and status and times it."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = scope["path"] if scope["path"] in ROUTES else "other"  # unknown paths share one label
        started, status = time.perf_counter(), [500]

        async def record(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, record)
        finally:
            # the app saw the connection close (it counts 499); the server may have answered first
            answered = scope.get(SERVER_ANSWERED, status[0])
            self.metrics.requests.labels(route, str(answered)).inc()
            self.metrics.latency.labels(route).observe(time.perf_counter() - started)
