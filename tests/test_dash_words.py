"""No command and no x-script tool takes a word starting with ``-`` for a path: ``--help`` / ``-h`` print the
usage (exit 0), a word like ``--bogus`` or ``-n`` is a usage error naming it (exit 2, xdpx.errors), and in
both cases nothing is written. Every console script of pyproject.toml and every registered tool is run in
an empty folder, which must still be empty afterwards (``x-script clean_checkpoints -n`` once cleaned a
folder named ``-n``, ``x-io mkdir -n`` created one)."""

from __future__ import annotations

import importlib
import os
import sys
import types
from pathlib import Path

import pytest
import tomllib

from xdpx.chain import script_usage
from xdpx.cli import x_script
from xdpx.command import commands, script, scripts
from xdpx.errors import EXIT_CONFIG

REPO = Path(__file__).resolve().parents[1]
ENTRIES = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]


def run_entry(name: str, argv: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    """Run console script ``name`` as the shell would (its entry function, sys.argv set); its exit code."""
    module, function = ENTRIES[name].split(":")
    monkeypatch.setattr(sys, "argv", [name] + argv)
    try:
        getattr(importlib.import_module(module), function)()
    except SystemExit as e:
        return 0 if e.code is None else e.code if isinstance(e.code, int) else 1
    return 0


def test_every_console_script_is_covered() -> None:
    assert {"x-train", "x-eval", "x-pred", "x-prepro", "x-viz", "x-tune", "x-serve", "x-io", "x-submit",
            "x-script"} <= set(ENTRIES)


@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_every_command_answers_help_and_writes_nothing(name: str, flag: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert run_entry(name, [flag], monkeypatch) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ") and name in out.splitlines()[0], out[:200]
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("words", [["--bogus"], ["-n"], ["somewhere", "--bogus"], ["somewhere", "-n"]])
@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_every_command_names_an_unknown_flag_and_writes_nothing(name: str, words: list[str], tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert run_entry(name, words, monkeypatch) == EXIT_CONFIG
    err = capsys.readouterr().err
    # x-io and x-script take a subcommand first: the unknown one named is then that first word
    named = words[0] if name in ("x-io", "x-script") else words[-1]
    assert repr(named) in err, err
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("words", [["x", "--bogus"], ["x", "-n"], ["-n"], ["x", "--dry=1"]])
@pytest.mark.parametrize("name", sorted(scripts.names()))
def test_every_tool_names_an_unknown_flag_and_writes_nothing(name: str, words: list[str], tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    if words[-1] == "-n" and "-KEYWORD" in (script_usage(name) or ""):
        pytest.skip(f"{name} takes words with one dash (its usage: -KEYWORD)")
    monkeypatch.chdir(tmp_path)
    assert x_script([name] + words) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert f"unknown flag {words[-1]!r}" in err, err
    assert os.listdir(tmp_path) == []


def test_a_tool_lists_its_flags_and_usage_in_help(capsys) -> None:
    assert x_script(["clean_checkpoints", "--help"]) == 0
    assert "usage: x-script clean_checkpoints ROOT [--dry]" in capsys.readouterr().out
    assert x_script(["clean_checkpoints", "-n"]) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert "unknown flag '-n' (flags of x-script clean_checkpoints: --dry; a path that starts with '-' is " \
           "written ./-n); usage: x-script clean_checkpoints ROOT [--dry]" in err, err


def test_a_tool_added_later_gets_the_check_from_its_usage_line(tmp_path: Path, capsys) -> None:
    """A new tool declares USAGE and parses nothing itself: its flags and negative numbers reach it, other
    dash words never do."""
    module = types.ModuleType("xdpx_dash_test_tool")
    module.USAGE = "usage: x-script dash_test OUT [--size N] [--loud]"
    sys.modules[module.__name__] = module
    received: list[list[str]] = []

    def tool(argv: list[str]) -> int:
        """Write nothing; remember the words."""
        received.append(argv)
        return 0

    tool.__module__ = module.__name__
    script("dash_test")(tool)
    try:
        assert x_script(["dash_test", "out", "--size", "-3", "--loud"]) == 0
        assert received == [["out", "--size", "-3", "--loud"]]
        assert x_script(["dash_test", "--out"]) == EXIT_CONFIG
        assert "unknown flag '--out' (flags of x-script dash_test: --loud, --size" in capsys.readouterr().err
        assert x_script(["dash_test", "-h"]) == 0
        assert "usage: x-script dash_test OUT [--size N] [--loud]" in capsys.readouterr().out
        assert len(received) == 1
    finally:
        scripts._entries.pop("dash_test")
        del sys.modules[module.__name__]


def test_declared_flags_and_values_still_reach_the_tools(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    # a negative number after a flag is a value: bce_threshold gets past the check to its own file error
    assert x_script(["bce_threshold", "missing.tsv", "--positive", "-1"]) == 1
    assert "missing.tsv" in capsys.readouterr().err
    (tmp_path / "runs").mkdir()
    assert x_script(["clean_checkpoints", "runs", "--dry"]) == 0
    assert "would free 0 bytes" in capsys.readouterr().out


def test_x_io_takes_a_dash_path_only_when_written_as_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert run_entry("x-io", ["mkdir", "-n"], monkeypatch) == EXIT_CONFIG
    assert "unknown flag '-n'" in capsys.readouterr().err and os.listdir(tmp_path) == []
    assert run_entry("x-io", ["mkdir", "./-n"], monkeypatch) == 0  # the way the message gives
    assert os.listdir(tmp_path) == ["-n"]
    assert run_entry("x-io", ["ls", ".", "--help"], monkeypatch) == 0
    assert capsys.readouterr().out.startswith("usage: x-io listdir PATH")


def test_exports_refuse_unknown_flags_through_the_chain(capsys) -> None:
    exports = [name for name in scripts.names() if name in commands]
    assert exports  # the check below ran over something
    for name in exports:
        assert x_script([name, "a.hjson", "--bogus"]) == EXIT_CONFIG
        assert "unknown flag '--bogus'" in capsys.readouterr().err


def test_python_m_xdpx_answers_help_without_a_command(tmp_path: Path, monkeypatch, capsys) -> None:
    from xdpx.cli import run_chain

    monkeypatch.chdir(tmp_path)
    assert run_chain(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m xdpx COMMAND CONFIG") and "x-train" in out
    assert run_chain(["--bogus"]) == EXIT_CONFIG
    assert "unknown command '--bogus'" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []
