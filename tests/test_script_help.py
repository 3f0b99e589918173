"""``x-script NAME --help`` (and ``-h``) answers with the tool's usage for every registered tool, exit 0, and
writes nothing: a tool never takes the flag for a path (options_docs once wrote its pages into a folder
named ``--help``, clean_checkpoints cleaned it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from xdpx.cli import x_script
from xdpx.command import scripts


@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("name", sorted(scripts.names()))
def test_every_tool_answers_help_and_writes_nothing(name: str, flag: str, tmp_path: Path, capsys,
                                                    monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert x_script([name, flag]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"x-script {name}")
    assert len(out.strip()) > len(f"x-script {name}")  # a description, not only the name
    assert os.listdir(tmp_path) == []


def test_help_after_other_arguments_is_still_help(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    assert x_script(["clean_checkpoints", "runs", "--help"]) == 0
    assert "clean_checkpoints" in capsys.readouterr().out
    assert os.listdir(tmp_path) == ["runs"] and os.listdir(tmp_path / "runs") == []
