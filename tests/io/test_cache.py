"""cached_path: remote files are downloaded once, and again only when the remote object changed."""

from __future__ import annotations

import os

import pytest

import xdpx.io as xio
from xdpx.io import cache


def put(path: str, data: str) -> None:
    with xio.open(path, "w") as f:
        f.write(data)


def read_local(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


@pytest.mark.parametrize("backend", ["s3", "memory"])
def test_cached_until_the_remote_changes(backend, request):
    root = request.getfixturevalue("s3_root") if backend == "s3" else f"memory://xdpx-cache-{os.getpid()}"
    url = f"{root}/vocab.txt"
    put(url, "version 1\n")
    before = cache.downloads
    first = xio.cached_path(url)
    assert first.startswith(xio.cache_dir()) and first.endswith("vocab.txt")  # basename kept
    assert read_local(first) == "version 1\n"
    for _ in range(3):
        assert xio.cached_path(url) == first
    assert cache.downloads == before + 1  # read repeatedly, fetched once

    put(url, "version 2\n")  # same size, new content: a new etag (s3) / modification time (memory)
    again = xio.cached_path(url)
    assert read_local(again) == "version 2\n"
    assert cache.downloads == before + 2
    assert xio.cached_path(url) == again and cache.downloads == before + 2
    if backend == "memory":
        xio.rmtree(root)


def test_cache_entry_survives_a_new_process_state(s3_root):
    url = f"{s3_root}/a.txt"
    put(url, "x")
    local = xio.cached_path(url)
    os.remove(local)  # a cleaned cache is refilled, not trusted
    assert read_local(xio.cached_path(url)) == "x"


def test_local_paths_are_returned_as_they_are(tmp_path):
    (tmp_path / "f.txt").write_text("x")
    assert xio.cached_path(str(tmp_path / "f.txt")) == str(tmp_path / "f.txt")
    assert xio.cached_path(f"file://{tmp_path}/f.txt") == f"{tmp_path}/f.txt"


def test_missing_remote_and_directories(s3_root):
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        xio.cached_path(f"{s3_root}/nope.txt")
    put(f"{s3_root}/d/x.txt", "x")
    with pytest.raises(IsADirectoryError):
        xio.cached_path(f"{s3_root}/d")


def test_cache_dir_from_env(monkeypatch, tmp_path):
    monkeypatch.setenv("XDPX_CACHE", str(tmp_path / "c"))
    assert xio.cache_dir() == str(tmp_path / "c")
    monkeypatch.delenv("XDPX_CACHE")
    assert xio.cache_dir() == os.path.expanduser("~/.cache/xdpx/io")
