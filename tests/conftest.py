"""Session fixtures shared by every test folder: a real S3 endpoint (moto's server on 127.0.0.1, used
through s3fs). Tests that do not ask for ``s3_endpoint`` / ``s3_root`` never start it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from xdpx.cli import run_chain
from xdpx.io import testing
from xdpx.io.testing import fake_aws_env, start_moto_server, use_s3_endpoint

BUCKET = "xdpx-io-test"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """CI's TensorFlow step sets XDPX_REQUIRE_TF=1: there the TF tests must run, not skip silently."""
    import os

    if os.environ.get("XDPX_REQUIRE_TF") != "1":
        return
    try:
        import tensorflow  # noqa: F401
    except ImportError as e:
        raise pytest.UsageError(f"XDPX_REQUIRE_TF=1 but tensorflow does not import ({e}); "
                                "install it with: pip install -e '.[tf]'") from e
    if not any(item.get_closest_marker("tf") for item in items):
        raise pytest.UsageError("XDPX_REQUIRE_TF=1 but no test marked tf was selected")


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A moto S3 server for the session, with fake AWS credentials and ``s3://xdpx-io-test`` created.

    ``s3://`` paths of this process point at it (``xdpx.io.set_storage_options``); a subprocess needs the
    endpoint passed on, e.g. in an io config file named by ``XDPX_IO_CONFIG`` (see docs/io.md).
    """
    pytest.importorskip("s3fs", reason="s3 tests need s3fs (pip install -e '.[test]')")
    pytest.importorskip("moto.server", reason="s3 tests need moto[server] (pip install -e '.[test]')")
    with pytest.MonkeyPatch.context() as mp:
        for name, value in fake_aws_env().items():
            mp.setenv(name, value)
        server, endpoint = start_moto_server()
        try:
            use_s3_endpoint(endpoint, BUCKET)
            yield endpoint
        finally:
            testing.current_endpoint = None
            server.stop()


@pytest.fixture
def s3_root(s3_endpoint: str) -> str:
    """A fresh prefix in the test bucket, so tests never see each other's objects."""
    return f"s3://{BUCKET}/{uuid.uuid4().hex[:10]}"


REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def reviews(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """x-prepro of examples/data/sample/reviews (char_zh, own vocabulary), once per test session."""
    root = tmp_path_factory.mktemp("reviews")
    config = root / "prepro.hjson"
    config.write_text(json.dumps({
        "__parent__": str(REPO / "examples/prepro/reviews_char"),
        "data_source": str(REPO / "examples/data/sample/reviews"), "data_dir": str(root / "data"), "workers": 1,
    }))
    assert run_chain(["x-prepro", str(config)]) == 0
    return root / "data"
