"""x-serve's GET /docs: a self-contained HTML page (no script or stylesheet from a CDN, which an offline
machine cannot fetch) that lists every route of /openapi.json and links to it."""

from __future__ import annotations

import re
from pathlib import Path

from serve_helpers import request, running_server

from xdpx.serve.limits import Limits
from xdpx.serve.openapi import docs_page, openapi_document


def test_docs_page_lists_every_route_of_the_openapi_document(cnn_run: Path) -> None:
    with running_server(cnn_run) as server:
        status, page, headers = request(server.address, "GET", "/docs")
        _, schema, _ = request(server.address, "GET", "/openapi.json")
        _, metrics, _ = request(server.address, "GET", "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/html"), (status, headers)
    assert page.startswith("<!DOCTYPE html>") and '<a href="/openapi.json">/openapi.json</a>' in page
    routes = [(method.upper(), path) for path, methods in schema["paths"].items() for method in methods]
    assert ("POST", "/predict") in routes and ("GET", "/info") in routes and ("POST", "/explain") in routes
    assert len(routes) == 7
    for method, path in routes:
        assert f"<code>{method} {path}</code>" in page, (method, path)
    assert "413" in page and "Prediction" in page and "&quot;maxItems&quot;: 256" in page  # limits and schemas
    assert not re.search(r"<script|<link|src=|https?://", page)  # nothing fetched from elsewhere
    assert 'route="/docs",status="200"' in metrics  # counted under its own route


def test_docs_page_escapes_what_the_model_names() -> None:
    page = docs_page(openapi_document(Limits(), ["<script>alert(1)</script>", "a&b"]))
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "a&amp;b" in page
