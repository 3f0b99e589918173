"""overwrite: true clears only a run directory of x-train (or an empty folder), and only x-train's files.

Everything else is refused before any work, also under --dry, with the reason (docs/reliability.md).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from train_runs import train_config

from xdpx.train.run_dir import RUN_MARKER, protected_reason


@pytest.fixture(scope="module")
def finished_run(reviews, tmp_path_factory) -> Path:
    """A real run directory (3 updates); tests work on copies of it."""
    from xdpx.cli import run_chain

    root = tmp_path_factory.mktemp("finished")
    assert run_chain(["x-train", str(train_config(root / "t.hjson", reviews, root / "run", max_update=3))]) == 0
    return root / "run"


def copy_of(run: Path, target: Path) -> Path:
    import shutil

    shutil.copytree(run, target)
    return target


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def assert_refused(cli, config: Path, *expected: str) -> None:
    """exit 2 with and without --dry, the reason in the message, before any work."""
    for flags in (["--dry"], []):
        code, out = cli("x-train", config, *flags)
        assert code == 2, out
        for text in expected:
            assert text in out, out
        assert "training cls_cnn" not in out


def test_overwrite_refuses_the_data_dir_and_its_parent(reviews, tmp_path, cli):
    before = tree(reviews)
    assert_refused(cli, train_config(tmp_path / "a.hjson", reviews, reviews, overwrite=True),
                   "overwrite refuses to clear", f"it holds data_dir {reviews}")
    assert_refused(cli, train_config(tmp_path / "b.hjson", reviews, reviews.parent, overwrite=True),
                   "it holds data_dir")
    assert tree(reviews) == before


def test_overwrite_refuses_another_x_prepro_output(reviews, tmp_path, cli):
    import shutil

    other = tmp_path / "other_data"  # holds args.py and log.txt, like a run, and meta.hjson
    shutil.copytree(reviews, other)
    before = tree(other)
    assert_refused(cli, train_config(tmp_path / "t.hjson", reviews, other, overwrite=True),
                   "it is not a run directory of x-train")
    assert tree(other) == before


def test_overwrite_refuses_a_folder_that_is_not_a_run(reviews, tmp_path, cli):
    source = tmp_path / "project"
    (source / "pkg").mkdir(parents=True)
    (source / "main.py").write_text("print('keep me')\n")
    (source / "pkg" / "log.txt").write_text("a log of something else\n")
    before = tree(source)
    assert_refused(cli, train_config(tmp_path / "t.hjson", reviews, source, overwrite=True),
                   "it is not a run directory of x-train", RUN_MARKER, "auto_suffix")
    assert tree(source) == before
    # without overwrite the message no longer suggests it for a folder that is not a run
    code, out = cli("x-train", train_config(tmp_path / "t.hjson", reviews, source), "--dry")
    assert code == 2 and "is not a run directory of x-train" in out and "overwrite: true" not in out
    # resume would write args.py / log.txt over the folder's own files: refused too
    assert_refused(cli, train_config(tmp_path / "t.hjson", reviews, source, resume=True), "resume:")
    assert tree(source) == before


def test_overwrite_refuses_the_current_and_home_directory(reviews, finished_run, tmp_path, cli, monkeypatch):
    run = copy_of(finished_run, tmp_path / "run")
    before = tree(run)
    monkeypatch.chdir(run)  # a real run directory, but the one the user stands in
    assert_refused(cli, train_config(tmp_path / "t.hjson", reviews, ".", overwrite=True),
                   "it is the current directory")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert_refused(cli, train_config(tmp_path / "t.hjson", reviews, "~", overwrite=True), "it is the current directory")
    monkeypatch.chdir(reviews)
    assert_refused(cli, train_config(tmp_path / "t.hjson", reviews, "~", overwrite=True), "it is your home directory")
    assert tree(run) == before


def test_protected_places(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert protected_reason("/", {}) == "it is the filesystem root"
    assert protected_reason(os.path.expanduser("~"), {}) in ("it is your home directory", "it holds your home directory")
    assert protected_reason(str(tmp_path.parent), {}) == "it holds the current directory"
    assert protected_reason("s3://bucket", {}) == "it is a whole bucket"
    assert protected_reason("s3://bucket/runs", {"data_dir": "s3://bucket/runs/data"}) == \
        "it holds data_dir s3://bucket/runs/data"
    assert protected_reason("s3://bucket/runs/a", {"data_dir": "s3://bucket/runs/ab"}) is None
    assert protected_reason(str(tmp_path / "run"), {"data_dir": str(tmp_path / "data")}) is None


def test_overwrite_refuses_a_run_holding_the_pretrained_model(reviews, finished_run, tmp_path, cli):
    run = copy_of(finished_run, tmp_path / "run")
    config = train_config(tmp_path / "t2.hjson", reviews, run, overwrite=True, pretrained_model=f"{run}/<best>")
    assert_refused(cli, config, f"it holds pretrained_model {run}")
    assert (run / "checkpoints.json").exists()


def test_rerunning_with_overwrite_replaces_the_run_and_keeps_foreign_files(reviews, finished_run, tmp_path, cli):
    run = copy_of(finished_run, tmp_path / "run")
    assert (run / RUN_MARKER).exists() and (run / "checkpoint-3.pt").exists()
    (run / "notes.md").write_text("my notes on this run\n")
    config = train_config(tmp_path / "t.hjson", reviews, run, overwrite=True, max_update=2, eval_interval=2)
    code, out = cli("x-train", config, "--dry")
    assert code == 0 and "the earlier run in" in out and "kept, not ours: notes.md" in out
    assert (run / "checkpoint-3.pt").exists()  # --dry changed nothing
    code, out = cli("x-train", config)
    assert code == 0, out
    assert not (run / "checkpoint-3.pt").exists() and (run / "checkpoint-2.pt").exists()
    assert (run / "notes.md").read_text() == "my notes on this run\n"
    log = (run / "log.txt").read_text()
    assert "overwrite: cleared the earlier run" in log and "kept notes.md" in log
    assert log.count("training cls_cnn") == 1  # the old log went with the old run


def test_overwrite_accepts_a_run_written_before_the_marker_and_an_empty_folder(reviews, finished_run, tmp_path, cli):
    legacy = copy_of(finished_run, tmp_path / "legacy")
    (legacy / RUN_MARKER).unlink()  # as an earlier version left it: args.py, log.txt, state.pt...
    code, out = cli("x-train", train_config(tmp_path / "t.hjson", reviews, legacy, overwrite=True, max_update=2), "--dry")
    assert code == 0 and "the earlier run in" in out
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli("x-train", train_config(tmp_path / "t.hjson", reviews, empty, overwrite=True, max_update=2))[0] == 0
    assert (empty / "state.pt").exists()


@pytest.mark.parametrize("flag", [None, "overwrite", "resume"])
def test_save_dir_that_is_a_file_is_refused_before_any_work(reviews, tmp_path, cli, flag):
    target = tmp_path / "results.txt"
    target.write_text("not a folder\n")
    config = train_config(tmp_path / "t.hjson", reviews, target, **({flag: True} if flag else {}))
    assert_refused(cli, config, "is a file, not a folder")
    assert target.read_text() == "not a folder\n"
