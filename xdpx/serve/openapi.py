"""The OpenAPI 3.1 document of x-serve, served at GET /openapi.json (written out: the routes are few)."""

from __future__ import annotations

from typing import Any

_ERROR = {"description": "", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


def _error(description: str) -> dict[str, Any]:
    return {**_ERROR, "description": description}


def openapi_document(limits: Any, labels: list[str]) -> dict[str, Any]:
    text = {"type": "string", "maxLength": limits.max_text_chars}
    return {
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
            ]},
        }},
    }
