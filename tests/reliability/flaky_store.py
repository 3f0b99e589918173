"""A TCP proxy on 127.0.0.1 in front of a store (the moto server) that can start resetting connections.

Stopping the moto server makes a store that refuses connections; a store behind a load balancer in an
outage more often accepts them and resets them (RST) while the request is being sent. aiohttp then leaves
tasks behind whose exception nobody awaits, which asyncio reports with tracebacks: the noise x-train's one
outage message must not be buried in (xdpx/io/retry.py).
"""

from __future__ import annotations

import socket
import struct
import threading

_RST = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends a reset, not a FIN


class ResettingProxy:
    """Forwards every connection to ``127.0.0.1:upstream_port`` until :meth:`reset`; from then on resets
    the open connections and every new one."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self.resetting = False
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def reset(self) -> None:
        with self._lock:
            self.resetting = True
            for sock in self._open:
                _abort(sock)
            self._open.clear()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.resetting:
                _abort(client)
                continue
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                _abort(client)
                continue
            with self._lock:
                self._open += [client, server]
            threading.Thread(target=_pump, args=(client, server), daemon=True).start()
            threading.Thread(target=_pump, args=(server, client), daemon=True).start()


def _abort(sock: socket.socket) -> None:
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RST)
        sock.close()
    except OSError:
        pass


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
        target.shutdown(socket.SHUT_WR)
    except OSError:
        pass
