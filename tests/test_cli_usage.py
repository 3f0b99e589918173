"""The command line explains itself: `--help` / `-h` on every config command (those added later too), a
config on standard input (`x-prepro - <<EOF`), and option docs that show every option with the value
that enables it and describe every component."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from xdpx.cli import run_chain
from xdpx.command import COMMON_OPTIONS, Command, commands, get_command, scripts
from xdpx.config.options import Option
from xdpx.scripts import options_docs
from xdpx.scripts.options import child_conditions

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "data" / "sample"


@pytest.mark.parametrize("name", options_docs.builtin_commands())
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_every_command_prints_its_usage(name: str, flag: str, capsys: pytest.CaptureFixture) -> None:
    assert run_chain([name, flag]) == 0
    out = capsys.readouterr().out
    summary = " ".join((type(get_command(name)).__doc__ or "").split())
    typed = f"x-script {name}" if name in scripts else name  # the exports are x-script tools
    assert out.startswith(f"usage: {typed} CONFIG") and summary and summary in out
    for part in ("--dry", "-h, --help", f"x-script options {name}", f"docs/options/{name}.md", "example:\n  "):
        assert part in out, part
    assert (ROOT / "docs" / "options" / f"{name}.md").exists()
    example = out.split("example:\n  ")[1][len(typed):].split()
    assert out.split("example:\n  ")[1].startswith(f"{typed} ")
    if example[0] not in ("-", "config.hjson"):  # an example file of the repository exists
        assert (ROOT / example[0]).exists(), example


def test_help_of_a_command_added_later_and_in_a_chain(capsys: pytest.CaptureFixture) -> None:
    @commands.register("x-usage-test")
    class UsageTest(Command):
        """Do a test thing with a config."""

        group = "usage"
        example = "x-usage-test examples/usage.hjson"

        def options(self) -> list:
            return [Option("size", int, default=1, doc="how big")]

    try:
        assert run_chain(["x-prepro", "a.hjson", "x-usage-test", "-h"]) == 0
        out = capsys.readouterr().out
        assert out.startswith("usage: x-usage-test CONFIG") and "Do a test thing with a config." in out
        assert "example:\n  x-usage-test examples/usage.hjson" in out
    finally:
        commands._entries.pop("x-usage-test")


def test_help_through_the_console_entry_point() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", "from xdpx.cli import x_train; x_train()", "--help"],
                            capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0 and result.stdout.startswith("usage: x-train CONFIG"), result.stderr
    result = subprocess.run([sys.executable, "-c", "from xdpx.cli import x_train; x_train()", "a.hjson", "--bogus"],
                            capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 2 and "unknown flag '--bogus' (the flags are --dry and --help" in result.stderr


def test_config_from_standard_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # relative paths of a config on stdin are relative to the working directory
    config = (f"{{\n  __parent__: examples/prepro/reviews_char\n  data_source: examples/data/sample/reviews\n"
              f"  data_dir: {tmp_path / 'data'}\n}}\n")
    monkeypatch.setattr(sys, "stdin", io.StringIO(config))
    assert run_chain(["x-prepro", "-"]) == 0
    meta = (tmp_path / "data" / "meta.hjson").read_text(encoding="utf-8")
    assert "char_zh" in meta and (tmp_path / "data" / "vocab.txt").exists()


@pytest.mark.parametrize("argv, stdin, message", [
    (["x-prepro", "-"], "", "<stdin>: no config on standard input"),
    (["x-prepro", "-"], "{data_dir: x, bogus: 1}", "<stdin>: unknown key 'bogus'"),
    (["x-prepro", "-", "x-train", "-"], "{}", "`-` (the config on standard input) may be given once"),
])
def test_config_from_standard_input_errors(argv: list[str], stdin: str, message: str, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    assert run_chain(argv + ["--dry"]) == 2
    assert message in capsys.readouterr().err


def test_option_docs_show_every_option_and_what_enables_it() -> None:
    page = (ROOT / "docs" / "options" / "x-prepro.md").read_text(encoding="utf-8")
    for name in ("threshold", "ignore_in_emb", "nwords"):
        line = next(line for line in page.splitlines() if line.startswith(f"| {name} |"))
        assert "(only when `vocab_file: null`)" in line, line  # before its Range, where it has one
    special = next(line for line in page.splitlines() if line.startswith("| special_targets |"))
    assert special.endswith("(only when `target_map_file: null`) |"), special
    tsv = page.split("## `parser: tsv`")[1]
    assert "Tab-separated columns without quoting" in tsv and "| quotechar |" in tsv
    for name in options_docs.builtin_commands():  # every declared option is on its command's page
        command = get_command(name)
        page = (ROOT / "docs" / "options" / f"{name}.md").read_text(encoding="utf-8")
        declared = set(child_conditions(COMMON_OPTIONS + command.options())) | {
            o.name for o in COMMON_OPTIONS + command.options() if isinstance(o, Option)}
        missing = [n for n in declared if f"| {n} |" not in page]
        assert not missing, f"docs/options/{name}.md lacks {missing}"
