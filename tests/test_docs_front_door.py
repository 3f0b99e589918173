"""A newcomer's way in: README.md is short and in the order a newcomer reads it, its test command is the one
CI runs, docs/README.md lists every page, and every page starts with commands before its reference."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PAGES = sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "README.md")


def test_readme_is_short_and_in_a_newcomers_order() -> None:
    assert len(README.splitlines()) < 150
    headings = re.findall(r"^## (.+)$", README, re.M)
    assert headings == ["Install", "Demo on real data", "Tests", "More results", "The commands",
                        "Where to read next"]
    assert "    bash examples/demo.sh" in README


def test_readme_gives_the_test_command_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    # the line after .ci/run's marker is the command; the README gives it alone on a line of its Tests section
    command = ci.split("# The test command, exactly as README.md gives it.\n", 1)[1].splitlines()[0]
    tests_section = README.split("## Tests\n", 1)[1].split("\n## ", 1)[0]
    assert command == "python3 -m pytest"
    assert f"    {command}\n" in tests_section
    # CI's measured time, said in minutes, and the same figure in docs/testing.md's details
    said = re.search(r"took (\d+(?:\.\d+)?) minutes on 2 idle CPU cores", tests_section)
    assert said, tests_section
    assert f"took {said.group(1)} minutes" in (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")


def test_every_docs_page_is_on_the_front_door() -> None:
    front = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([\w-]+\.md)(?:#[\w-]+)?\)", front))
    assert {p.name for p in PAGES} - linked == set()
    assert "](options/)" in front


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_page_starts_with_commands(page: Path) -> None:
    # the first code block (4-space indented, after a blank line) comes before the page's first table and
    # its first section heading
    lines = page.read_text(encoding="utf-8").splitlines()
    first = {"code": None, "table": None, "section": None}
    for number, line in enumerate(lines):
        if first["code"] is None and line.startswith("    ") and line.strip() and not lines[number - 1].strip():
            first["code"] = number
        if first["table"] is None and line.startswith("| "):
            first["table"] = number
        if first["section"] is None and line.startswith("## "):
            first["section"] = number
    assert first["code"] is not None, f"{page.name}: no command block"
    later = [n for n in (first["table"], first["section"]) if n is not None]
    assert all(first["code"] < n for n in later), f"{page.name}: a table or section comes before any command"
