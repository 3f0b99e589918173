"""Fixtures for xdpx.io tests: isolated io state, and one root folder per backend (local, memory://, s3://).

The S3 fixtures (``s3_endpoint``, ``s3_root``) are in tests/conftest.py, shared with tests/config.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator

import pytest

import xdpx.io as xio
from xdpx.io import credentials, progress, testing


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
    if testing.current_endpoint:  # the S3 server may have been started during this test
        testing.use_s3_endpoint(testing.current_endpoint)
    assert progress._enabled is None


@pytest.fixture(params=["local", "memory", "s3"])
def root(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    """An empty folder on each backend: a local temp dir, a memory:// prefix, an s3:// prefix on moto."""
    if request.param == "local":
        yield str(tmp_path / "root")
    elif request.param == "memory":
        url = f"memory://xdpx-test-{uuid.uuid4().hex[:10]}"
        yield url
        if xio.exists(url):
            xio.rmtree(url)
    else:
        yield request.getfixturevalue("s3_root")
