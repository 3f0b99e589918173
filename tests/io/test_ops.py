"""Every xdpx.io operation on each backend: local paths, memory:// and s3:// (moto through s3fs)."""

from __future__ import annotations

import hashlib
import os
import time

import pytest

import xdpx.io as xio


def write(path: str, data: bytes | str) -> None:
    with xio.open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)


def test_open_write_read_text_and_binary(root):
    write(f"{root}/d/a.txt", "héllo\nworld\n")  # parents are created as needed
    with xio.open(f"{root}/d/a.txt") as f:
        assert f.read() == "héllo\nworld\n"
    with xio.open(f"{root}/d/a.txt") as f:
        assert [line for line in f] == ["héllo\n", "world\n"]
    write(f"{root}/d/b.bin", bytes(range(256)) * 10)
    with xio.open(f"{root}/d/b.bin", "rb") as f:
        assert f.read(3) == b"\x00\x01\x02"
        f.seek(256)
        assert f.read(2) == b"\x00\x01"
    write(f"{root}/d/a.txt", "replaced")
    with xio.open(f"{root}/d/a.txt") as f:
        assert f.read() == "replaced"


def test_open_missing_file_names_the_path(root):
    with pytest.raises(FileNotFoundError) as e:
        xio.open(f"{root}/missing.txt")
    assert f"{root}/missing.txt" in str(e.value)


def test_queries(root):
    write(f"{root}/d/a.txt", "12345")
    write(f"{root}/d/sub/b.txt", "123")
    assert xio.exists(f"{root}/d/a.txt") and xio.exists(f"{root}/d") and xio.exists(f"{root}/d/sub")
    assert not xio.exists(f"{root}/d/nope.txt")
    assert xio.isfile(f"{root}/d/a.txt") and not xio.isfile(f"{root}/d")
    assert xio.isdir(f"{root}/d") and xio.isdir(f"{root}/d/sub") and not xio.isdir(f"{root}/d/a.txt")
    assert not xio.isdir(f"{root}/nope") and not xio.isfile(f"{root}/nope")
    assert xio.listdir(f"{root}/d") == ["a.txt", "sub"]
    assert xio.listdir(f"{root}/d/") == ["a.txt", "sub"]
    assert xio.size(f"{root}/d/a.txt") == 5
    assert xio.size(f"{root}/d") == 8  # a directory: total of the files under it
    assert xio.md5(f"{root}/d/a.txt") == hashlib.md5(b"12345").hexdigest()
    with pytest.raises(NotADirectoryError):
        xio.listdir(f"{root}/d/a.txt")
    with pytest.raises(FileNotFoundError):
        xio.size(f"{root}/nope")
    with pytest.raises(IsADirectoryError):
        xio.md5(f"{root}/d")


def test_last_modified_is_epoch_seconds_and_moves_forward(root):
    if root.startswith("memory://"):
        # fsspec's memory files record creation time; good enough for "recent"
        write(f"{root}/a.txt", "x")
        assert abs(xio.last_modified(f"{root}/a.txt") - time.time()) < 60
        return
    write(f"{root}/a.txt", "x")
    first = xio.last_modified(f"{root}/a.txt")
    assert abs(first - time.time()) < 60
    time.sleep(1.1)  # S3 LastModified has one-second resolution
    write(f"{root}/a.txt", "y")
    assert xio.last_modified(f"{root}/a.txt") > first
    with pytest.raises(FileNotFoundError):
        xio.last_modified(f"{root}/nope")


def test_makedirs_remove_rmtree(root):
    xio.makedirs(f"{root}/x/y")
    xio.makedirs(f"{root}/x/y")  # exist_ok by default
    write(f"{root}/x/y/f.txt", "f")
    write(f"{root}/x/g.txt", "g")
    assert xio.isdir(f"{root}/x/y")
    with pytest.raises(FileExistsError):
        xio.makedirs(f"{root}/x/y", exist_ok=False)
    with pytest.raises(IsADirectoryError):
        xio.remove(f"{root}/x")
    with pytest.raises(NotADirectoryError):
        xio.rmtree(f"{root}/x/g.txt")
    xio.remove(f"{root}/x/g.txt")
    assert not xio.exists(f"{root}/x/g.txt")
    with pytest.raises(FileNotFoundError):
        xio.remove(f"{root}/x/g.txt")
    xio.rmtree(f"{root}/x")
    assert not xio.exists(f"{root}/x/y/f.txt") and not xio.exists(f"{root}/x")


def test_copy_move_copytree_within_one_backend(root):
    write(f"{root}/src/a.txt", "aaa")
    write(f"{root}/src/deep/b.txt", "bb")
    assert xio.copy(f"{root}/src/a.txt", f"{root}/c.txt") == f"{root}/c.txt"
    xio.makedirs(f"{root}/into")
    write(f"{root}/into/keep.txt", "k")
    assert xio.copy(f"{root}/src/a.txt", f"{root}/into") == f"{root}/into/a.txt"  # into a directory, like cp
    assert xio.md5(f"{root}/into/a.txt") == xio.md5(f"{root}/src/a.txt")

    xio.copytree(f"{root}/src", f"{root}/tree")
    assert xio.listdir(f"{root}/tree") == ["a.txt", "deep"]
    with xio.open(f"{root}/tree/deep/b.txt") as f:
        assert f.read() == "bb"

    assert xio.move(f"{root}/c.txt", f"{root}/moved.txt") == f"{root}/moved.txt"
    assert not xio.exists(f"{root}/c.txt") and xio.isfile(f"{root}/moved.txt")
    xio.move(f"{root}/tree", f"{root}/tree2")
    assert not xio.exists(f"{root}/tree") and xio.listdir(f"{root}/tree2/deep") == ["b.txt"]

    with pytest.raises(IsADirectoryError):
        xio.copy(f"{root}/src", f"{root}/x")
    with pytest.raises(NotADirectoryError):
        xio.copytree(f"{root}/src/a.txt", f"{root}/x")
    with pytest.raises(FileNotFoundError):
        xio.copy(f"{root}/nope", f"{root}/x")


@pytest.mark.parametrize("other", ["local", "memory"])
def test_copy_between_backends_keeps_md5(root, other, tmp_path, request):
    src_root = str(tmp_path / "other") if other == "local" else f"memory://xdpx-other-{os.getpid()}-{request.node.name[-20:]}"
    src_root = src_root.replace("[", "_").replace("]", "_")
    data = os.urandom(300_000)
    write(f"{src_root}/tree/x.bin", data)
    write(f"{src_root}/tree/sub/y.txt", "why")
    xio.copy(f"{src_root}/tree/x.bin", f"{root}/x.bin")
    assert xio.md5(f"{root}/x.bin") == xio.md5(f"{src_root}/tree/x.bin") == hashlib.md5(data).hexdigest()
    xio.copytree(f"{src_root}/tree", f"{root}/t")
    assert xio.listdir(f"{root}/t") == ["sub", "x.bin"]
    xio.copy(f"{root}/t/sub/y.txt", f"{src_root}/back.txt")
    with xio.open(f"{src_root}/back.txt") as f:
        assert f.read() == "why"
    xio.move(f"{root}/t", f"{src_root}/moved")
    assert not xio.exists(f"{root}/t")
    assert xio.listdir(f"{src_root}/moved") == ["sub", "x.bin"]
    if other == "memory":
        xio.rmtree(src_root)


def test_is_writable_true_cases(root):
    assert xio.is_writable(f"{root}/new/deeper/file.txt")  # nothing exists yet: the nearest ancestor decides
    write(f"{root}/f.txt", "x")
    assert xio.is_writable(f"{root}/f.txt")
    assert xio.is_writable(root)
    assert xio.listdir(root) == ["f.txt"]  # the probe leaves nothing behind


def test_is_writable_false_cases_local(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "f.txt").write_text("x")
    os.chmod(ro / "f.txt", 0o444)
    (tmp_path / "plain").write_text("x")
    assert not xio.is_writable(str(tmp_path / "plain" / "child.txt"))  # under a file
    if os.geteuid() != 0:  # root ignores permission bits
        os.chmod(ro, 0o555)
        try:
            assert not xio.is_writable(str(ro / "new.txt"))
            assert not xio.is_writable(str(ro / "f.txt"))
        finally:
            os.chmod(ro, 0o755)


def test_is_writable_false_cases_remote(s3_root):
    assert not xio.is_writable("s3://no-such-bucket-xdpx/x.txt")
    write(f"{s3_root}/plain", "x")
    assert not xio.is_writable(f"{s3_root}/plain/child.txt")  # an object cannot be a folder too
    assert not xio.is_writable("https://example.invalid/file.txt")  # http(s) is read-only


def test_readonly_scheme_refuses_writes():
    with pytest.raises(ValueError, match="read-only"):
        xio.open("https://example.invalid/x.txt", "w")
    with pytest.raises(ValueError, match="read-only"):
        xio.remove("https://example.invalid/x.txt")


def test_unsupported_mode_for_remote(root):
    if not xio.is_remote(root):
        return
    with pytest.raises(ValueError, match="not supported for remote"):
        xio.open(f"{root}/a.txt", "a")


def test_paths_helpers():
    assert xio.join("s3://b", "d", "/f.txt") == "s3://b/d/f.txt"
    assert xio.join("s3://", "b") == "s3://b"
    assert xio.dirname("s3://b/d/f.txt") == "s3://b/d"
    assert xio.basename("https://h/a/f.txt?sig=1") == "f.txt"
    assert xio.protocol_of("s3a://b/k") == "s3" and xio.protocol_of("x/y") == "file"
    assert xio.protocol_of("file:///tmp/x") == "file" and not xio.is_remote("file:///tmp/x")
    assert xio.is_remote("memory://x")


def test_import_loads_no_backend():
    import subprocess
    import sys

    code = (
        "import sys, xdpx.io, xdpx.io.cli; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('fsspec', 's3fs', 'tqdm', 'botocore', 'ossfs')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
