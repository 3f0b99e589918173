"""uvicorn's h11 protocol with a deadline on the request line and headers (x-serve ``--header_timeout``).

uvicorn bounds a body only through the app (xdpx.serve.limits, 408) and an idle keep-alive connection
with ``timeout_keep_alive``, but not a connection that says nothing after connecting, or sends its headers
a few bytes at a time: each such connection holds one of ``--max_connections`` for as long as it likes
(slowloris). Here a request's headers must be complete within ``header_timeout`` seconds of the
connection's opening or of the request's first byte; past that the server answers 408 and closes.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from xdpx.serve.metrics import SERVER_ANSWERED

PROTOCOL = "xdpx.serve.header_timeout:HeaderTimeoutH11Protocol"  # uvicorn.Config(http=...), with config.header_timeout


class HeaderTimeoutH11Protocol(H11Protocol):
    """H11Protocol answering 408 and closing when a request's headers are not complete within
    ``config.header_timeout`` seconds (an attribute set on the uvicorn.Config, so that it travels to the
    worker processes with the config)."""

    def __init__(self, config: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self.header_timeout: float = config.header_timeout
        self._header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:  # a request begun (or nothing yet): its headers have a deadline
            if self._header_deadline is None and not self.transport.is_closing():
                self._arm()
        else:  # the headers are in: the body has the app's body_timeout
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # the keep-alive timer bounds the wait for the next request
        self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        """uvicorn answers 400 itself to bytes h11 refuses (a malformed chunked body...) and closes; an app
        reading that body sees only the closed connection. The scope says what the client got, for /metrics."""
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.scope[SERVER_ANSWERED] = 400  # type: ignore[literal-required]
        super().send_400_response(msg)

    def _arm(self) -> None:
        self._disarm()
        self._header_deadline = self.loop.call_later(self.header_timeout, self._headers_too_late)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_late(self) -> None:
        self._header_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            body = json.dumps({"error": f"the request headers did not arrive within {self.header_timeout:g} s"})
            self.transport.write(b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                                 b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body.encode()))
            self.transport.close()
