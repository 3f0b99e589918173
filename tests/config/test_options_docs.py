"""docs/options/ is generated from the declarations and must be up to date."""

from __future__ import annotations

from pathlib import Path

from xdpx.command import Command, commands
from xdpx.config.options import Option
from xdpx.registry import Registry
from xdpx.scripts import options_docs

ROOT = Path(__file__).resolve().parents[2]
gadgets = Registry("test_gadget")


@gadgets.register("small")
class Small:
    options = [Option("size", int, default=1, doc="how small")]


@gadgets.register("big")
class Big:
    options = [Option("weight", float, default=2.0, doc="how heavy | in kg")]


@commands.register("x-doc-test")
class DocTest(Command):
    group = "doc"

    def options(self):
        return [Option("gadget", str, default="small", registry=gadgets, doc="which gadget"),
                Option("fast", bool, default=False, doc="go fast",
                       children={True: [Option("speed", int, default=3, doc="how fast")]})]


def test_page_lists_defaults_then_what_each_choice_adds():
    page = options_docs.command_page("x-doc-test")
    assert "| gadget | str | 'small' | which gadget One of: big, small. |" in page
    assert "| size | int | 1 | how small |" in page
    big = page.index("## `gadget: big` adds")
    assert page.index("| weight | float | 2.0 | how heavy \\| in kg |") > big
    assert page.index("| speed | int | 3 | how fast (only when `fast: true`) |") > page.index("## `fast: true` adds")
    assert "user_dir" in page


def test_committed_docs_are_up_to_date(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    assert options_docs.main(["--check"]) == 0, capsys.readouterr().err
