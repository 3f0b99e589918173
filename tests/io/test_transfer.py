"""Large transfers: 50 MB local -> s3 -> local with a progress bar, md5 equal; bars stay quiet when asked."""

from __future__ import annotations

import hashlib
import os
import re

import pytest

import xdpx.io as xio

MB = 2**20


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    path = tmp_path_factory.mktemp("big") / "big.bin"
    data = os.urandom(50 * MB)
    path.write_bytes(data)
    return str(path), hashlib.md5(data).hexdigest()


def test_50mb_round_trip_through_s3_with_progress(big_file, s3_root, tmp_path, capsys):
    local, digest = big_file
    xio.set_progress(True)  # stderr is captured (not a terminal): force the automatic bars on

    assert xio.copy(local, f"{s3_root}/big.bin") == f"{s3_root}/big.bin"
    up = capsys.readouterr().err
    # tqdm redraws at most every 0.1 s and clears its line at the end (leave=False): the last frame shown
    # may be short of 100%, but the bar (name, percentage, total) must have been drawn.
    assert re.search(r"big\.bin:\s+\d+%\|.*/50\.0M", up), up[-500:]

    assert xio.size(f"{s3_root}/big.bin") == 50 * MB
    back = str(tmp_path / "back" / "big.bin")
    xio.copy(f"{s3_root}/big.bin", back)
    down = capsys.readouterr().err
    assert re.search(r"big\.bin:\s+\d+%\|.*/50\.0M", down), down[-500:]

    assert xio.md5(back) == digest
    capsys.readouterr()  # md5 of 50 MB shows its own bar
    xio.set_progress(False)
    assert xio.md5(f"{s3_root}/big.bin") == digest
    assert capsys.readouterr().err == ""
    assert [n for n in os.listdir(tmp_path / "back")] == ["big.bin"]  # no temp file left behind


def test_quiet_when_not_a_terminal_or_when_asked(big_file, tmp_path, capsys, monkeypatch):
    local, digest = big_file
    xio.copy(local, str(tmp_path / "a.bin"))  # automatic: stderr is not a terminal here
    assert capsys.readouterr().err == ""

    xio.set_progress(True)
    xio.copy(local, str(tmp_path / "b.bin"), progress=False)  # the per-call argument wins
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("XDPX_QUIET", "1")
    xio.copy(local, str(tmp_path / "c.bin"))
    assert capsys.readouterr().err == ""
    monkeypatch.delenv("XDPX_QUIET")

    xio.set_progress(None)
    xio.copy(local, str(tmp_path / "d.bin"), progress=True)
    assert "/50.0M" in capsys.readouterr().err
    assert xio.md5(str(tmp_path / "d.bin")) == digest


def test_small_transfers_show_no_bar_even_when_forced_on(tmp_path, capsys):
    xio.set_progress(True)
    (tmp_path / "s.txt").write_text("small")
    xio.copy(str(tmp_path / "s.txt"), str(tmp_path / "t.txt"))
    assert capsys.readouterr().err == ""


def test_progress_bar_when_stderr_is_a_terminal(tmp_path, capsys, monkeypatch):
    from xdpx.io import progress

    monkeypatch.setattr(progress, "_stderr_is_tty", lambda: True)
    (tmp_path / "m.bin").write_bytes(b"\0" * (progress.PROGRESS_THRESHOLD + 1))
    xio.copy(str(tmp_path / "m.bin"), str(tmp_path / "n.bin"))
    assert "m.bin" in capsys.readouterr().err


def test_remote_read_and_upload_progress(s3_root, capsys):
    data = os.urandom(5 * MB)
    with xio.open(f"{s3_root}/r.bin", "wb", progress=True) as f:
        f.write(data)
    assert "r.bin" in capsys.readouterr().err
    with xio.open(f"{s3_root}/r.bin", "rb", progress=True) as f:
        assert f.read() == data
    assert "r.bin" in capsys.readouterr().err
