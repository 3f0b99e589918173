"""Run the app with uvicorn: bind the socket (so port 0 can be printed), drain on SIGTERM, exit 0.

On SIGTERM (or Ctrl-C) uvicorn stops accepting connections, lets every request it has accepted finish
(up to ``drain_timeout`` seconds), closes idle keep-alive connections, then ends the app's lifespan (the
batcher stops after the last answer). uvicorn re-raises the signal once it has shut down, to die of it;
the handler installed here turns that into a normal return, so x-serve exits 0 after a clean drain.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sys
import tempfile
from dataclasses import asdict
from typing import Any


def _uvicorn_config(app: Any, host: str, port: int, max_connections: int, drain_timeout: float,
                    header_timeout: float = 10.0, **extra: Any) -> Any:
    import uvicorn  # lazy: loads uvicorn

    from xdpx.serve.header_timeout import PROTOCOL  # lazy: loads uvicorn, prometheus_client

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan="on",
                            backlog=2048, limit_concurrency=max_connections, timeout_keep_alive=5,
                            timeout_graceful_shutdown=drain_timeout, h11_max_incomplete_event_size=64 << 10,
                            server_header=False, http=PROTOCOL, **extra)
    config.header_timeout = header_timeout  # read by the protocol; pickled with the config to the workers
    return config


def serve(app: Any, host: str, port: int, max_connections: int = 1024, drain_timeout: float = 30.0,
          announce: str = "", header_timeout: float = 10.0) -> int:
    """Serve ``app`` in this process until SIGTERM/SIGINT; prints ``... on http://HOST:PORT`` once bound."""
    import uvicorn  # lazy: loads uvicorn

    config = _uvicorn_config(app, host, port, max_connections, drain_timeout, header_timeout)
    sock = _listening_socket(config)
    bound_host, bound_port = sock.getsockname()[:2]
    print(f"x-serve: serving {announce} on http://{bound_host}:{bound_port} "
          "(POST /predict; GET /health, /ready, /metrics, /openapi.json)", flush=True)
    server = uvicorn.Server(config)
    previous = {s: signal.signal(s, _after_drain) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.run(sockets=[sock])
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        sock.close()
    return 0 if server.started else 1


def _listening_socket(config: Any) -> Any:
    """The bound socket, listening already (a client that connects as soon as the address is printed
    waits in the backlog while the app starts, instead of being refused), without Nagle's delay."""
    sock = config.bind_socket()
    # asyncio turns Nagle's algorithm off only on sockets whose proto is TCP, which a socket bound by
    # uvicorn is not (proto 0): set TCP_NODELAY here (Linux passes it on to accepted connections), or
    # each answer written in two parts (head, body) waits for the client's delayed ACK, ~40 ms.
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.listen(config.backlog)
    return sock


def _after_drain(signum: int, frame: Any) -> None:
    """The signal uvicorn re-raises after its graceful shutdown: nothing left to do."""


def serve_workers(settings: dict[str, Any], workers: int, host: str, port: int, max_connections: int = 1024,
                  drain_timeout: float = 30.0, announce: str = "", header_timeout: float = 10.0) -> int:
    """``workers`` processes sharing one socket, each loading the model (xdpx.serve.app:app_from_environment);
    /metrics adds up the workers' values (prometheus-client's multiprocess mode)."""
    from uvicorn.supervisors import Multiprocess  # lazy: loads uvicorn

    metrics_dir = tempfile.mkdtemp(prefix="xdpx-serve-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    os.environ["XDPX_SERVE"] = json.dumps({**settings, "limits": asdict(settings["limits"])})
    try:
        config = _uvicorn_config("xdpx.serve.app:app_from_environment", host, port, max_connections, drain_timeout,
                                 header_timeout, factory=True, workers=workers)
        sock = _listening_socket(config)
        bound_host, bound_port = sock.getsockname()[:2]
        print(f"x-serve: serving {announce} with {workers} worker processes on http://{bound_host}:{bound_port} "
              "(POST /predict; GET /health, /ready, /metrics, /openapi.json)", flush=True)
        import inspect  # lazy: with uvicorn, below

        import uvicorn  # lazy: loads uvicorn, only when serving

        if "target" in inspect.signature(Multiprocess).parameters:  # uvicorn before the workers' health checks
            Multiprocess(config, target=uvicorn.Server(config).run, sockets=[sock]).run()
        else:
            Multiprocess(config, sockets=[sock]).run()
        sock.close()
    finally:
        shutil.rmtree(metrics_dir, ignore_errors=True)
    print("x-serve: stopped", file=sys.stderr, flush=True)
    return 0
