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


@pytest.mark.parametrize("name", sorted(scripts.names()))
def test_every_tool_gives_its_usage_as_typed(name: str, capsys) -> None:
    # the exports' help is their command's (CONFIG, --dry, stdin): typed as `x-script export_hf`, not `export_hf`
    assert x_script([name, "--help"]) == 0
    lines = capsys.readouterr().out.splitlines()
    usages = [line for line in lines if line.startswith("usage:")]
    assert usages and all(line.startswith(f"usage: x-script {name} ") for line in usages), usages
    commands_typed = [line.strip() for line in lines if line.strip().startswith((f"{name} ", f"{name}\t"))]
    assert commands_typed == [], f"lines that give the command without x-script: {commands_typed}"


@pytest.mark.parametrize("name", sorted(scripts.names()))
def test_the_tool_list_gives_a_whole_summary(name: str, capsys) -> None:
    # `x-script --help` lists the first line of each tool's docstring: that line must be its whole first
    # paragraph, a sentence (aggregate_results and merge_lora were cut mid-sentence)
    assert x_script(["--help"]) == 0
    listed = {line.split()[0]: line.split(None, 1)[1] for line in capsys.readouterr().out.splitlines()[3:]}
    doc = (scripts.get(name).__doc__ or "").strip()
    first_paragraph = doc.split("\n\n")[0]
    assert "\n" not in first_paragraph, f"{name}: the summary runs over several lines: {first_paragraph!r}"
    assert listed[name] == first_paragraph and listed[name].endswith("."), listed[name]
