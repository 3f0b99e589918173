"""A stray temp file is not the mark of a run (xdpx/io/ownership.py, docs/reliability.md).

An atomic write cut short leaves ``.<name>.<12 hex>.tmp`` beside its target. Only the temp file of the run
marker (``..xdpx-run.<12 hex>.tmp``: a run killed while it committed its very first file) makes a folder a
run directory of x-train; the temp file of any other file (``.notes.txt.0123456789ab.tmp``, written by
another program or command) does not, so overwrite and resume refuse the folder and leave it as it was.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_overwrite import assert_refused, tree
from train_runs import train_config

from xdpx.io.atomic import is_temp_of
from xdpx.io.ownership import folder_owner, is_run_dir

STRAY = ".notes.txt.0123456789ab.tmp"
MARKER_TEMP = "..xdpx-run.0123456789ab.tmp"


@pytest.mark.parametrize(("name", "target", "expected"), [
    (STRAY, "notes.txt", True),
    (STRAY, ".xdpx-run", False),
    (MARKER_TEMP, ".xdpx-run", True),
    (MARKER_TEMP, "notes.txt", False),
    ("..xdpx-run.0123456789a.tmp", ".xdpx-run", False),  # 11 hex digits
    ("..xdpx-run.0123456789AB.tmp", ".xdpx-run", False),  # upper case: not what local_temp_for writes
    ("..xdpx-run.0123456789ab.tmp.bak", ".xdpx-run", False),
    (".xdpx-run.0123456789ab.tmp", ".xdpx-run", False),  # the leading dot of the temp file is missing
])
def test_is_temp_of_matches_only_the_temp_file_of_that_target(name, target, expected):
    assert is_temp_of(name, target) is expected


def folder_with(path: Path, **files: str) -> Path:
    path.mkdir(parents=True)
    for name, text in files.items():
        (path / name).write_text(text)
    return path


@pytest.mark.parametrize("with_target", [True, False], ids=["beside-its-file", "alone"])
def test_a_folder_with_a_stray_temp_file_is_not_taken_for_a_run(reviews, tmp_path, cli, with_target):
    files = {STRAY: "half of my notes"} | ({"notes.txt": "my notes\n"} if with_target else {})
    folder = folder_with(tmp_path / "notes", **files)
    before = tree(folder)
    assert is_run_dir(str(folder)) is False and folder_owner(str(folder)) is None
    assert_refused(cli, train_config(tmp_path / "o.hjson", reviews, folder, overwrite=True),
                   f"key 'overwrite': overwrite refuses to clear '{folder}': it is not a run directory of x-train")
    assert_refused(cli, train_config(tmp_path / "r.hjson", reviews, folder, resume=True), "resume:")
    code, out = cli("x-train", train_config(tmp_path / "t.hjson", reviews, folder), "--dry")
    assert code == 2 and "is not a run directory of x-train" in out, out
    assert tree(folder) == before


def test_the_temp_file_of_the_run_marker_alone_makes_a_run_directory(reviews, tmp_path, cli):
    folder = folder_with(tmp_path / "killed", **{MARKER_TEMP: ""})
    assert is_run_dir(str(folder)) is True and folder_owner(str(folder)) == "x-train"
    code, out = cli("x-train", train_config(tmp_path / "o.hjson", reviews, folder, overwrite=True), "--dry")
    assert code == 0, out
