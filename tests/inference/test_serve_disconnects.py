"""x-serve's /metrics counts what the client got: a client that closes its connection before its body is in
is counted as 499 (client closed request: no answer left), a malformed chunked body as the 400 that the
HTTP layer answered; neither is a 500. Raw sockets on 127.0.0.1 against a served run."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from serve_helpers import Server, request, running_server


@pytest.fixture(scope="module")
def server(cnn_run: Path) -> Iterator[Server]:
    with running_server(cnn_run) as running:
        yield running
        assert running.process.poll() is None, "the server died"


def counts(server: Server) -> dict[str, float]:
    """status -> xdpx_serve_requests_total of /predict."""
    text = request(server.address, "GET", "/metrics")[1]
    return {m.group(1): float(m.group(2)) for m in
            re.finditer(r'^xdpx_serve_requests_total\{route="/predict",status="(\d+)"\} (\S+)$', text, re.M)}


def settled(server: Server, before: dict[str, float], total: int) -> dict[str, float]:
    """The /predict counts added since ``before``, once ``total`` requests are counted (the server counts a
    request when its handler ends, a moment after the connection closed)."""
    deadline = time.monotonic() + 30
    while True:
        now = counts(server)
        added = {status: now[status] - before.get(status, 0.0) for status in now if now[status] != before.get(status)}
        if sum(added.values()) >= total or time.monotonic() > deadline:
            return added
        time.sleep(0.1)


def test_a_client_that_closes_mid_body_is_counted_499_not_500(server: Server) -> None:
    before = counts(server)
    for _ in range(2):
        with socket.create_connection(server.address, timeout=10) as sock:
            sock.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 100\r\n\r\n[\"half a bo")  # 10 of the 100 bytes announced
            time.sleep(0.2)
    assert settled(server, before, 2) == {"499": 2.0}
    assert request(server.address, "POST", "/predict", json.dumps(["still serving"]).encode())[0] == 200


def test_a_malformed_chunked_body_is_counted_as_the_400_the_client_got(server: Server) -> None:
    before = counts(server)
    with socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"5\r\n[\"ab\"\r\nnot a chunk size\r\n\r\n")
        answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 400 "), answer
    assert settled(server, before, 1) == {"400": 1.0}
