"""http(s):// paths are read-only: read, query, md5 and cache files served by a local HTTP server."""

from __future__ import annotations

import functools
import http.server
import threading
import time
from collections.abc import Iterator

import pytest

import xdpx.io as xio
from xdpx.io import cache


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def http_root(tmp_path) -> Iterator[tuple[str, object]]:
    pytest.importorskip("aiohttp", reason="http(s) paths need aiohttp (fsspec's http backend)")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=tmp_path))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", tmp_path
    finally:
        server.shutdown()
        server.server_close()


def test_read_query_and_cache_over_http(http_root):
    url, folder = http_root
    (folder / "f.txt").write_text("hello http\n")
    assert xio.exists(f"{url}/f.txt") and xio.isfile(f"{url}/f.txt") and not xio.exists(f"{url}/nope.txt")
    assert xio.size(f"{url}/f.txt") == 11
    with xio.open(f"{url}/f.txt") as f:
        assert f.read() == "hello http\n"
    assert xio.md5(f"{url}/f.txt") == xio.md5(str(folder / "f.txt"))
    assert abs(xio.last_modified(f"{url}/f.txt") - time.time()) < 60

    before = cache.downloads
    local = xio.cached_path(f"{url}/f.txt")
    assert xio.cached_path(f"{url}/f.txt") == local and cache.downloads == before + 1
    time.sleep(1.1)  # Last-Modified has one-second resolution
    (folder / "f.txt").write_text("hello again\n")
    with open(xio.cached_path(f"{url}/f.txt"), encoding="utf-8") as f:
        assert f.read() == "hello again\n"
    assert cache.downloads == before + 2

    with pytest.raises(FileNotFoundError, match="nope.txt"):
        xio.open(f"{url}/nope.txt")
    assert not xio.is_writable(f"{url}/f.txt")
    with pytest.raises(ValueError, match="read-only"):
        xio.copy(str(folder / "f.txt"), f"{url}/g.txt")
