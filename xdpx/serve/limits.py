"""What one request may hold, and reading a body within those bounds.

Every limit answers a clear 4xx with a message naming the limit and the value seen: a body over
``max_body_bytes`` gets 413 (the body is read and thrown away up to ``drain_bytes``, so a client that
sends it whole still reads the answer instead of a reset), a body that does not arrive within
``body_timeout`` seconds 408, and JSON that is too deep, holds a number too long, too many inputs or a
text too long 400. The JSON is parsed by the standard library with hooks that refuse long numbers before
converting them, and deep nesting is refused both while parsing (the parser's recursion limit) and after.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any


class RequestError(Exception):
    """A request the server refuses: the HTTP status and the message of the answer."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int = 1 << 20
    drain_bytes: int = 64 << 20
    body_timeout: float = 30.0
    max_inputs: int = 256
    max_text_chars: int = 10_000
    max_json_depth: int = 8
    max_number_chars: int = 32


async def read_body(request: Any, limits: Limits) -> bytes:
    """The body of ``request`` (a Starlette Request), or a RequestError (400, 408 or 413)."""
    declared = request.headers.get("content-length")
    if declared is not None and not declared.strip().isdigit():
        raise RequestError(400, f"Content-Length {declared!r} is not a number of bytes")
    if declared is not None and int(declared) > limits.max_body_bytes:
        await _drain(request, limits)
        raise RequestError(413, f"the body has {int(declared)} bytes; at most {limits.max_body_bytes} "
                                "(send fewer inputs per request)")
    try:
        return await asyncio.wait_for(_read(request, limits), timeout=limits.body_timeout)
    except asyncio.TimeoutError:
        raise RequestError(408, f"the body did not arrive within {limits.body_timeout:g} s") from None


async def _read(request: Any, limits: Limits) -> bytes:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limits.max_body_bytes:
            await _drain(request, limits, already=size)
            raise RequestError(413, f"the body has more than {limits.max_body_bytes} bytes "
                                    "(send fewer inputs per request)")
        chunks.append(chunk)
    return b"".join(chunks)


async def _drain(request: Any, limits: Limits, already: int = 0) -> None:
    """Read and drop the rest of a refused body (up to drain_bytes, within body_timeout), so the client,
    which sends its whole body before reading the answer, gets the 413 and not a reset connection."""
    async def drop() -> None:
        size = already
        async for chunk in request.stream():
            size += len(chunk)
            if size > limits.drain_bytes:
                return
    try:
        await asyncio.wait_for(drop(), timeout=limits.body_timeout)
    except (asyncio.TimeoutError, RuntimeError):  # RuntimeError: the stream was already consumed
        pass


def _refuse_constant(name: str) -> Any:
    raise RequestError(400, f"the body holds {name}, which is not a JSON number")


def parse_inputs(body: bytes, limits: Limits) -> list[Any]:
    """The JSON list of inputs in ``body``: each a string or a list of strings, within the limits."""
    def number(text: str) -> Any:
        if len(text) > limits.max_number_chars:
            raise RequestError(400, f"the body holds a number of {len(text)} characters; at most "
                                    f"{limits.max_number_chars}")
        return float(text) if any(c in text for c in ".eE") else int(text)

    try:
        value = json.loads(body.decode("utf-8"), parse_int=number, parse_float=number,
                           parse_constant=_refuse_constant)
    except RecursionError:
        raise RequestError(400, f"the JSON is nested too deeply; at most {limits.max_json_depth} levels") from None
    except UnicodeDecodeError as e:
        raise RequestError(400, f"the body is not JSON: it is not UTF-8 ({e})") from None
    except json.JSONDecodeError as e:
        raise RequestError(400, f"the body is not JSON: {e}") from None
    depth = _depth(value, limits.max_json_depth)
    if depth > limits.max_json_depth:
        raise RequestError(400, f"the JSON is nested too deeply: more than {limits.max_json_depth} levels")
    if not isinstance(value, list) or not value:
        raise RequestError(400, 'send a non-empty JSON list of inputs, e.g. ["a text", "another text"]')
    if len(value) > limits.max_inputs:
        raise RequestError(400, f"{len(value)} inputs in one request; at most {limits.max_inputs} "
                                "(split them over several requests)")
    for index, item in enumerate(value):
        texts = item if isinstance(item, list) else [item]
        for text in texts:
            if isinstance(text, str) and len(text) > limits.max_text_chars:
                raise RequestError(400, f"input {index}: a text of {len(text)} characters; at most "
                                        f"{limits.max_text_chars}")
    return value


def _depth(value: Any, stop: int) -> int:
    """The nesting depth of a parsed JSON value (a list or object is one level), counted up to stop + 1."""
    deepest, level = 0, [(value, 1)]
    while level:
        item, depth = level.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, depth)
            if deepest > stop:
                return deepest
            children = item.values() if isinstance(item, dict) else item
            level.extend((child, depth + 1) for child in children)
    return deepest
