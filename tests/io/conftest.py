"""Fixtures for xdpx.io tests: a real S3 endpoint (moto server on 127.0.0.1), isolated io state.

Other test folders can build the same session fixture from ``xdpx.io.testing.start_moto_server``.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator

import pytest

import xdpx.io as xio
from xdpx.io import credentials, progress
from xdpx.io.testing import fake_aws_env, start_moto_server, use_s3_endpoint

BUCKET = "xdpx-io-test"


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A moto S3 server for the session, with fake AWS credentials and ``s3://xdpx-io-test`` created."""
    pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    with pytest.MonkeyPatch.context() as mp:
        for name, value in fake_aws_env().items():
            mp.setenv(name, value)
        server, endpoint = start_moto_server()
        try:
            use_s3_endpoint(endpoint, BUCKET)
            yield endpoint
        finally:
            server.stop()


@pytest.fixture
def s3_root(s3_endpoint: str) -> str:
    """A fresh prefix in the test bucket, so tests never see each other's objects."""
    return f"s3://{BUCKET}/{uuid.uuid4().hex[:10]}"


@pytest.fixture(autouse=True)
def _isolated_io_state(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test gets its own cache dir and default progress/storage settings, restored afterwards."""
    monkeypatch.setenv("XDPX_CACHE", str(tmp_path_factory.mktemp("xdpx-cache")))
    monkeypatch.delenv("XDPX_QUIET", raising=False)
    monkeypatch.delenv("XDPX_IO_CONFIG", raising=False)
    saved = copy.deepcopy((credentials._configured, credentials._explicit))
    saved_file_layer = credentials._file_layer
    yield
    xio.set_progress(None)
    with credentials._lock:
        credentials._configured.clear()
        credentials._configured.update(saved[0])
        credentials._explicit.clear()
        credentials._explicit.update(saved[1])
        credentials._file_layer = saved_file_layer
    assert progress._enabled is None
