"""The OpenAPI 3.1 document of x-serve, served at GET /openapi.json (written out: the routes are few), and
the page of GET /docs that shows it to a person."""

from __future__ import annotations

import json
from html import escape
from typing import Any

from xdpx.serve.search import MAX_HITS

_ERROR = {"description": "", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


def _error(description: str) -> dict[str, Any]:
    return {**_ERROR, "description": description}


def openapi_document(limits: Any, labels: list[str], embeds: bool = False, searches: bool = False,
                     reranks: bool = False) -> dict[str, Any]:
    """The document of the routes served; ``embeds``: the run is a bi-encoder, POST /embed is served;
    ``searches``: x-serve --corpus, POST /search is served (``reranks``: with --reranker)."""
    text = {"type": "string", "maxLength": limits.max_text_chars}
    document = {
        "openapi": "3.1.0",
        "info": {"title": "x-serve", "version": "1",
                 "description": "Predictions of an XDPX run: the run's own processor, requests batched together."},
        "paths": {
            "/predict": {"post": {
                "summary": "Predict a list of inputs",
                "requestBody": {"required": True, "content": {"application/json": {"schema": {
                    "type": "array", "minItems": 1, "maxItems": limits.max_inputs,
                    "items": {"oneOf": [
                        {**text, "description": "a line in the run's training format (a trailing label is ignored)"},
                        {"type": "array", "items": text, "description": "the texts of one sample (two for a pair)"},
                    ]}}}}},
                "responses": {
                    "200": {"description": "one prediction per input, in order", "content": {"application/json": {
                        "schema": {"type": "array", "items": {"$ref": "#/components/schemas/Prediction"}}}}},
                    "400": _error("the body is not a JSON list of inputs, or breaks a limit (the message says which)"),
                    "408": _error(f"the body did not arrive within {limits.body_timeout:g} s"),
                    "413": _error(f"the body is over {limits.max_body_bytes} bytes"),
                    "503": _error("the queue is full (or too many connections); see the Retry-After header"),
                }}},
            "/health": {"get": {"summary": "The model served (no filesystem paths)",
                                "responses": {"200": {"description": "alive",
                                                      "content": {"application/json": {"schema": {"type": "object"}}}}}}},
            "/ready": {"get": {"summary": "Readiness: 200 when predictions can be answered",
                               "responses": {"200": {"description": "ready"},
                                             "503": _error("the batcher is not running")}}},
            "/info": {"get": {"summary": "The run served: name, model, checkpoint, labels, the checkpoint's metrics, "
                                         "the data it was trained on (no filesystem paths)",
                              "responses": {"200": {"description": "the run",
                                                    "content": {"application/json": {"schema": {"type": "object"}}}}}}},
            "/": {"get": {"summary": "A page to try the model in a browser (GET /info's run beside the answers)",
                          "responses": {"200": {"description": "the page",
                                                "content": {"text/html": {"schema": {"type": "string"}}}}}}},
            "/explain": {"post": {
                "summary": "Predict a list of inputs with each one's token attributions (Integrated Gradients)",
                "parameters": [
                    {"name": "baseline", "in": "query", "schema": {"enum": ["pad", "mask", "zeros"], "default": "pad"}},
                    {"name": "n_steps", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 512,
                                                                  "default": 50}}],
                "requestBody": {"required": True, "content": {"application/json": {"schema": {
                    "type": "array", "minItems": 1, "maxItems": limits.max_inputs,
                    "items": {"description": "as for /predict: a line in the training format, or a sample's texts"}}}}},
                "responses": {
                    "200": {"description": "/predict's answer of each input with its attributions added",
                            "content": {"application/json": {"schema": {
                                "type": "array", "items": {"$ref": "#/components/schemas/Explanation"}}}}},
                    "400": _error("the body is not a JSON list of inputs, or breaks a limit (the message says which)"),
                    "404": _error("this run has no label to explain (a language model, a bi-encoder) or is an ONNX "
                                  "export"),
                    "422": _error("an input that cannot be explained: empty, over the run's max_len, the wrong number "
                                  "of texts; or a bad baseline / n_steps"),
                    "503": _error("the queue is full (or too many connections); see the Retry-After header"),
                }}},
            "/metrics": {"get": {"summary": "Prometheus metrics (text format)",
                                 "responses": {"200": {"description": "metrics",
                                                       "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
        },
        "components": {"schemas": {
            "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}},
            "Prediction": {"oneOf": [
                {"type": "object", "required": ["label", "prob", "probabilities"], "properties": {
                    "label": {"type": "string", "enum": labels} if labels else {"type": "string"},
                    "prob": {"type": "number"},
                    "probabilities": {"type": "object", "additionalProperties": {"type": "number"}}}},
                {"type": "object", "required": ["score"], "properties": {"score": {"type": "number"}}},
                {"type": "object", "required": ["labels", "probabilities"], "description": "a multilabel run's",
                 "properties": {"labels": {"type": "array", "items": {"type": "string"}},
                                "probabilities": {"type": "object", "additionalProperties": {"type": "number"}}}},
                {"type": "object", "required": ["embeddings", "cosine"], "description": "a bi-encoder's, for a pair",
                 "properties": {"embeddings": {"type": "array", "items": {"type": "array",
                                                                           "items": {"type": "number"}}},
                                "cosine": {"type": "number"}}},
            ]},
            "Explanation": {"type": "object", "description": "/predict's answer plus (NER: in each entity)",
                            "properties": {
                "target": {"type": ["string", "null"], "description": "the label whose logit is explained"},
                "output": {"type": "number"}, "baseline_output": {"type": "number"},
                "delta": {"type": "number", "description": "sum of the scores - (output - baseline_output)"},
                "tokens": {"type": "array", "description": "[word, score] of the first text",
                           "items": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}]}},
                "tokens_b": {"type": "array", "description": "pair models: the second text"}}},
            "Embedding": {"type": "object", "required": ["embedding"], "properties": {
                "embedding": {"type": "array", "items": {"type": "number"},
                              "description": "L2-normalised when the run's normalize is on (the default)"}}},
        }},
    }
    if embeds:
        document["paths"]["/embed"] = {"post": {
            "summary": "Embed a list of texts (bi-encoder runs)",
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "array", "minItems": 1, "maxItems": limits.max_inputs,
                "items": {**text, "description": "one text, embedded on its own"}}}}},
            "responses": {
                "200": {"description": "one embedding per text, in order", "content": {"application/json": {
                    "schema": {"type": "array", "items": {"$ref": "#/components/schemas/Embedding"}}}}},
                "400": _error("the body is not a JSON list of texts, or breaks a limit (the message says which)"),
                "503": _error("the queue is full (or too many connections); see the Retry-After header"),
            }}}
    if searches:
        document["paths"]["/search"] = search_path(limits, reranks)
        document["components"]["schemas"]["Hit"] = HIT
    return document


# a hit of POST /search (xdpx/inference/retrieve.py); rerank_score and first_stage_rank only when reranked
HIT = {"type": "object", "required": ["rank", "id", "text", "score"], "properties": {
    "rank": {"type": "integer", "minimum": 1, "description": "1 for the best hit"},
    "id": {"type": "integer", "minimum": 0, "description": "the text's line number in the corpus minus 1 (as "
                                                           "x-script build_index numbers them)"},
    "text": {"type": "string"},
    "score": {"type": "number", "description": "the bi-encoder's cosine of query and text (approximate for an "
                                               "int8 or binary index)"},
    "rerank_score": {"type": "number", "description": "with rerank: the reranker's log-odds of relevance"},
    "first_stage_rank": {"type": "integer", "minimum": 1, "description": "with rerank: the rank before reranking"}}}


def search_path(limits: Any, reranks: bool) -> dict[str, Any]:
    """POST /search of x-serve --corpus (xdpx/serve/search.py): its body, answer and refusals."""
    count = {"type": "integer", "minimum": 1, "maximum": MAX_HITS}
    rerank = {**count, "description": "the first-stage hits the reranker orders again (at least k)" if reranks else
              "not served: this server has no --reranker (a request with rerank is 422)"}
    return {"post": {
        "summary": "The corpus texts nearest a query (bi-encoder cosine)" + (", reranked by a cross-encoder on "
                                                                             "request" if reranks else ""),
        "requestBody": {"required": True, "content": {"application/json": {"schema": {
            "type": "object", "required": ["query"], "additionalProperties": False, "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": limits.max_text_chars},
                "k": {**count, "default": 10, "description": "the number of hits answered"},
                "rerank": rerank}}}}},
        "responses": {
            "200": {"description": "the hits, best first", "content": {"application/json": {"schema": {
                "type": "object", "required": ["query", "k", "rerank", "hits"], "properties": {
                    "query": {"type": "string", "description": "as searched (spaces around it removed)"},
                    "k": {"type": "integer"}, "rerank": {"type": ["integer", "null"]},
                    "hits": {"type": "array", "items": {"$ref": "#/components/schemas/Hit"}}}}}}},
            "400": _error("the body is not JSON, or breaks a limit (the message says which)"),
            "404": _error("x-serve was started without --corpus"),
            "422": _error("an unknown field, an empty query, k or rerank not an integer from 1 to "
                          f"{MAX_HITS}, rerank below k or without --reranker (the message names the field)"),
        }}}


def docs_page(document: dict[str, Any]) -> str:
    """GET /docs: the routes of ``document`` as one self-contained HTML page (no script, no stylesheet from a
    CDN: Swagger UI's assets cannot be fetched on an offline machine), with a link to /openapi.json for
    tools that read the document itself (Swagger UI or Redoc elsewhere, code generators)."""
    info = document.get("info", {})
    parts = [f"<h1>{escape(info.get('title', 'x-serve'))}</h1>", f"<p>{escape(info.get('description', ''))}</p>",
             '<p>The OpenAPI document: <a href="/openapi.json">/openapi.json</a> (OpenAPI '
             f"{escape(document.get('openapi', ''))}). Each route below, with what it answers.</p>"]
    for path, methods in document.get("paths", {}).items():
        for method, operation in methods.items():
            parts.append(f'<h2 id="{escape(method + path)}"><code>{escape(method.upper())} {escape(path)}</code>: '
                         f"{escape(operation.get('summary', ''))}</h2>")
            body = operation.get("requestBody", {}).get("content", {})
            for media, content in body.items():
                parts.append(f"<p>Body ({escape(media)}):</p><pre>{_schema_text(content.get('schema'))}</pre>")
            rows = "".join(f"<tr><td>{escape(status)}</td><td>{escape(answer.get('description', ''))}</td></tr>"
                           for status, answer in operation.get("responses", {}).items())
            parts.append(f"<table><tr><th>status</th><th>answer</th></tr>{rows}</table>")
    schemas = document.get("components", {}).get("schemas", {})
    if schemas:
        parts.append("<h2>Schemas</h2>")
        parts += [f"<h3>{escape(name)}</h3><pre>{_schema_text(schema)}</pre>" for name, schema in schemas.items()]
    style = ("body{font-family:sans-serif;max-width:60em;margin:2em auto;padding:0 1em}"
             "pre{background:#f4f4f4;padding:.5em;overflow:auto}td,th{border:1px solid #ccc;padding:.2em .5em}"
             "table{border-collapse:collapse}")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(info.get("title", ""))} '
            f"API</title><style>{style}</style></head><body>\n" + "\n".join(parts) + "\n</body></html>\n")


def _schema_text(schema: Any) -> str:
    return escape(json.dumps(schema, indent=2, ensure_ascii=False))
