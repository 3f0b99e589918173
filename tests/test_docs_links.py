"""The docs stand alone: every relative link of README.md and docs/**/*.md leads to a file of the repository,
every ``#anchor`` names a heading of its target (GitHub's slugs), and no doc points at files a clone does not
have (the project's private notes, this machine's folders).

Links and headings inside code (fenced blocks, indented blocks, `code spans`) are not links and headings on
GitHub, so they are left out, as GitHub leaves them out.
"""

from __future__ import annotations

import re
import subprocess
import unicodedata
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# a folder of this machine, not a path inside a URL or under another folder (s3://bucket/tmp/ is fine)
MACHINE_PATH = re.compile(r"(?<![\w.:/~-])/(tmp|root|home|work)/[^\s`'\")]*")
# the one placeholder home the docs use in examples of absolute paths (a Slurm job's --chdir)
PLACEHOLDER_HOME = "/home/me/"
# references to files outside the repository: the project's private notes and sources
FORBIDDEN = ("../shared", "shared/DESIGN", "seeds/", "DESIGN.md", "DESIGN invariant", "seed manual")
# "the manual" without saying whose: the original XDPX's manual is linked from docs/original-xdpx.md
UNNAMED_MANUAL = re.compile(r"\bthe (?:original |seed )?manual\b", re.I)
# repository paths named in prose or code (not after "commit:", which names a file of an old commit)
REPO_PATH = re.compile(r"(?<![\w:/.-])((?:xdpx|tests|bench|docs|examples|\.ci)/[\w./-]+\.(?:py|md|hjson|sh|png))")


def github_slug(text: str) -> str:
    """The anchor GitHub gives a heading's text (github-slugger): lowercase; every character that is not
    a letter, a digit, a mark, '-', '_' or a space dropped; each space turned into '-'."""
    kept = [c for c in text.lower() if c in "-_ " or c.isalnum() or unicodedata.category(c).startswith("M")]
    return "".join(kept).replace(" ", "-")


def heading_text(raw: str) -> str:
    """The text GitHub renders for a heading's source: code spans keep their content, links their text,
    emphasis and images lose their markers."""
    text = CODE_SPAN.sub(lambda m: m.group(2).strip(), raw)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return text.replace("*", "")  # underscores stay: the docs' are inside names (export_tf), not emphasis


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the lines outside fenced and indented code blocks."""
    out: list[tuple[int, str]] = []
    fence: str | None = None
    previous_blank = True
    in_indented = False
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if fence is not None:
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = None
            previous_blank = False
            continue
        if match:
            fence = match.group(1)
            continue
        blank = not line.strip()
        indented = line.startswith("    ") or line.startswith("\t")
        in_indented = indented and not blank and (previous_blank or in_indented)
        if not in_indented:
            out.append((number, line))
        if not blank:
            previous_blank = False
        else:
            previous_blank = True
    return out


def anchors(path: Path) -> set[str]:
    """Every anchor of a Markdown file: its headings' slugs, duplicates numbered -1, -2, ..."""
    seen: dict[str, int] = {}
    result: set[str] = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        slug = github_slug(heading_text(match.group(2)))
        if slug in seen:
            seen[slug] += 1
            slug = f"{slug}-{seen[slug]}"
        else:
            seen[slug] = 0
        result.add(slug)
    return result


def links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every Markdown link and image outside code."""
    found = []
    for number, line in prose_lines(text):
        for match in LINK.finditer(CODE_SPAN.sub("", line)):
            found.append((number, match.group(1)))
    return found


def ignored_by_git(path: Path) -> bool:
    """True when git ignores the path (it would be missing from a clone); False outside a git checkout."""
    try:
        result = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", str(path)], capture_output=True)
    except FileNotFoundError:
        return False
    return result.returncode == 0


def link_problems(doc: Path, anchor_cache: dict[Path, set[str]], root: Path = ROOT) -> list[str]:
    """One line per link of ``doc`` that leads nowhere in ``root``: a missing or git-ignored file, a path out
    of the repository, an anchor no heading of the target has."""
    problems = []
    for number, target in links(doc.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
            continue
        where = f"{doc.relative_to(root)}:{number}"
        path_part, _, anchor = target.partition("#")
        dest = (doc.parent / unquote(path_part)).resolve() if path_part else doc
        if path_part:
            if root not in dest.parents and dest != root:
                problems.append(f"{where}: link {target!r} leaves the repository")
                continue
            if not dest.exists():
                problems.append(f"{where}: link {target!r}: {dest.relative_to(root)} does not exist")
                continue
            if ignored_by_git(dest):
                problems.append(f"{where}: link {target!r}: {dest.relative_to(root)} is ignored by git (not in a clone)")
                continue
        if anchor and dest.suffix == ".md":
            if dest not in anchor_cache:
                anchor_cache[dest] = anchors(dest)
            if unquote(anchor) not in anchor_cache[dest]:
                problems.append(f"{where}: link {target!r}: no heading of {dest.relative_to(root)} has the "
                                f"anchor #{anchor}")
    return problems


# ---- the checker itself: it must find what it is meant to find

def test_github_slugs_match_github():
    # the anchors github-slugger (what GitHub runs) gives these headings
    assert github_slug(heading_text("Variables: `${name}`")) == "variables-name"
    assert github_slug(heading_text("x-serve on uvicorn + Starlette")) == "x-serve-on-uvicorn--starlette"
    assert github_slug(heading_text("Where an update's time goes")) == "where-an-updates-time-goes"
    assert github_slug(heading_text("Scaling out: 1 against 2 processes, sharded evaluation")) == \
        "scaling-out-1-against-2-processes-sharded-evaluation"
    assert github_slug(heading_text("TensorFlow (export_tf, needs `pip install xdpx[tf]`)")) == \
        "tensorflow-export_tf-needs-pip-install-xdpxtf"
    assert github_slug(heading_text("**Bold** and [a link](x.md)")) == "bold-and-a-link"
    assert github_slug("验证/预测") == "验证预测"


def test_checker_finds_broken_links_and_anchors(tmp_path):
    root = tmp_path.resolve()
    (root / "docs").mkdir()
    (root / "docs" / "config.md").write_text("# Config\n\n## Syntax\n", encoding="utf-8")
    doc = root / "docs" / "probe.md"
    doc.write_text("# Top\n\n## Same\n\n## Same\n\n[ok](#same-1) [bad](#same-2) [f](config.md#no-such)\n"
                       "[gone](nowhere.md) `[code](nowhere.md)`\n\n    [indented](nowhere.md)\n\n"
                       "```\n# not a heading\n[fenced](nowhere.md)\n```\n[up](../../x.md) [fine](config.md#syntax)\n",
                   encoding="utf-8")
    problems = link_problems(doc, {}, root)
    text = "\n".join(problems)
    assert "#same-2" in text and "#same-1" not in text
    assert "config.md#no-such" in text
    # the code span, the indented and the fenced ones are not links
    assert [p for p in problems if "nowhere" in p] == ["docs/probe.md:8: link 'nowhere.md': docs/nowhere.md does not exist"]
    assert "leaves the repository" in text
    assert len(problems) == 4


# ---- the docs

def test_every_relative_link_and_anchor_resolves():
    cache: dict[Path, set[str]] = {}
    problems = [p for doc in DOCS for p in link_problems(doc, cache)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_reference_outside_the_repository(doc):
    problems = []
    for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        for word in FORBIDDEN:
            if word in line:
                problems.append(f"{doc.relative_to(ROOT)}:{number}: names {word!r}, which a clone does not have")
        if UNNAMED_MANUAL.search(line):
            problems.append(f"{doc.relative_to(ROOT)}:{number}: cites 'the manual': say 'the original XDPX' "
                            "(docs/original-xdpx.md links its manual)")
        for match in MACHINE_PATH.finditer(line):
            if not match.group(0).startswith(PLACEHOLDER_HOME):
                problems.append(f"{doc.relative_to(ROOT)}:{number}: machine path {match.group(0)!r}")
        for match in REPO_PATH.finditer(line):
            if not (ROOT / match.group(1)).exists():
                problems.append(f"{doc.relative_to(ROOT)}:{number}: names {match.group(1)}, not in the repository")
    assert not problems, "\n".join(problems)
