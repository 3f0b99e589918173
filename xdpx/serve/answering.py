"""The part of x-serve's batched routes that /predict, /embed and /explain share: read and parse the body
under the limits, queue the inputs in the route's Batcher (counted in the queue gauge), and turn what can go
wrong into one JSON error: the body's own faults (xdpx/serve/limits.py), a bad input (400, /explain: 422), a
full queue (503 with Retry-After), a client gone before its body arrived, a model that cannot do this for the
run (404) or one that failed (500, the server keeps serving)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from xdpx.serve.batching import Overloaded
from xdpx.serve.limits import RequestError, parse_inputs, read_body
from xdpx.serve.metrics import CLIENT_CLOSED
from xdpx.serve.predictor import BadInput


async def answer_inputs(request: Request, state: Any, batcher: Any, error: Callable[..., Response], what: str,
                        jobs: Callable[[list[Any]], list[Any]] = list, bad_input_status: int = 400,
                        refused: tuple[type[Exception], Callable[[Exception], str]] | None = None) -> Any:
    """The batcher's answers to the request's inputs (``jobs``: what is queued for them), or the error
    Response; ``refused``: an exception class the model raises for a run it cannot serve this way (404, its
    message) and the message to give."""
    try:
        inputs = parse_inputs(await read_body(request, state.limits), state.limits)
        state.metrics.queued.inc(len(inputs))
        try:
            answers = await batcher.predict(jobs(inputs))
        finally:
            state.metrics.queued.dec(len(inputs))
        for index, answer in enumerate(answers):
            if isinstance(answer, BadInput):
                return error(bad_input_status, f"input {index}: {answer}")
    except RequestError as e:
        return error(e.status, e.message, e.headers)
    except Overloaded as e:
        state.metrics.refused.inc()
        return error(503, str(e), {"Retry-After": str(e.retry_after)})
    except ClientDisconnect:  # the connection closed before the body was in: nobody reads this answer
        return error(CLIENT_CLOSED, "the client closed the connection before its request body arrived")
    except Exception as e:
        if refused is not None and isinstance(e, refused[0]):
            return error(404, refused[1](e))
        return error(500, f"{what} failed: {type(e).__name__}: {e}")  # the model failed: say so, keep serving
    return answers
