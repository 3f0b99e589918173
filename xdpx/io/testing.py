"""Helpers for tests that need a real S3 endpoint (moto's server in a thread, on a free local port).

Typical pytest fixture (see tests/io/conftest.py)::

    server, endpoint = start_moto_server()
    use_s3_endpoint(endpoint)          # fake credentials + xdpx.io storage options
    ...
    server.stop()
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

from . import credentials, exists, makedirs

FAKE_KEY = "testing-key-id"
FAKE_SECRET = "testing-secret-value"

# The endpoint of the last use_s3_endpoint() call, so test fixtures that reset xdpx.io's storage options
# can point s3:// back at the server.
current_endpoint: str | None = None


def start_moto_server() -> tuple[Any, str]:
    """Start ``moto.server.ThreadedMotoServer`` on 127.0.0.1 with a free port; returns (server, endpoint_url).

    Call ``server.stop()`` when done. Needs ``moto[server]``.
    """
    from moto.server import ThreadedMotoServer  # lazy: optional test package moto[server]

    # werkzeug logs every request to stderr; that noise would bury test output.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    return server, f"http://{host}:{port}"


def fake_aws_env() -> dict[str, str]:
    """Environment variables that keep boto from looking for real credentials or instance metadata."""
    return {
        "AWS_ACCESS_KEY_ID": FAKE_KEY,
        "AWS_SECRET_ACCESS_KEY": FAKE_SECRET,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def use_s3_endpoint(endpoint_url: str, bucket: str | None = None) -> None:
    """Point ``s3://`` paths of this process at ``endpoint_url`` with fake credentials; create ``bucket``.

    Environment variables are left alone: set :func:`fake_aws_env` with the test's monkeypatch.
    """
    global current_endpoint
    current_endpoint = endpoint_url
    credentials.set_storage_options(
        "s3",
        endpoint_url=endpoint_url,
        key=FAKE_KEY,
        secret=FAKE_SECRET,
    )
    if bucket and not exists(f"s3://{bucket}"):
        makedirs(f"s3://{bucket}")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for a server a test starts: PostgreSQL, Slurm, a rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def unavailable(required_by: str, reason: str) -> None:
    """Skip the calling test because ``reason``; fail it instead where the environment variable
    ``required_by`` is "1" (CI sets it where it installs the server, so a missing one cannot pass silently)."""
    import pytest  # lazy: pytest: test extra, only when a test is skipped or failed

    if os.environ.get(required_by) == "1":
        pytest.fail(f"{required_by}=1 but {reason}", pytrace=False)
    pytest.skip(reason)
