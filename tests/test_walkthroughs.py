"""Every command that README.md and docs/*.md give a user (their indented command lines) runs as written on a
fresh install, as far as a test can run it without hours of training:

- the program is one XDPX installs (``x-train``...), an ``x-script`` tool that is registered, or a script,
  shell script or file of the repository that exists;
- a command on an example config (``x-train examples/reviews/train_cnn.hjson``) is that config's command and
  passes ``--dry`` in the workspace of tests/test_examples.py, where its data and earlier runs exist (the
  short runs that test trains);
- a Python script of examples/ or bench/ starts on a fresh install and answers ``--help`` (the NER
  walkthrough once ended in ``ModuleNotFoundError: No module named 'snownlp'``), and the data sets that
  ``examples/prepare_data.py --sets`` names exist;
- a shell script is valid bash (``bash -n``).

Placeholders (``train.hjson``, ``RUN_DIR``...) are not files: only the program is checked for those.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_examples import DRY, DRY_OVERRIDES, PREPRO, child_config, inside, run

# the same workspace as tests/test_examples.py, built once per session (a fixture: pytest registers it by import)
from test_examples import workspace as examples_workspace  # noqa: F401

from xdpx.command import scripts

pytestmark = pytest.mark.timeout(300)  # the first test on a worker may build the examples workspace

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
PROGRAMS = {"x-eval", "x-io", "x-pred", "x-prepro", "x-script", "x-serve", "x-submit", "x-train", "x-tune", "x-viz"}
START = re.compile(r"(x-[a-z]+|python3?|bash|sh|torchrun)\s")
# files that a walkthrough makes before the command that names them (prepare_data.py, link_minilm.sh)
MADE_BY_WALKTHROUGH = ("examples/data/full/",)


def documented_commands() -> list[tuple[str, str]]:
    """(page:line, command) of every indented command line; ``a && b`` and ``a; b`` are two commands."""
    found = []
    for page in PAGES:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if not line.startswith("    "):
                continue
            for part in re.split(r"\s*(?:&&|;)\s*", line.strip()):
                part = part.split("  #")[0].split(" # ")[0].strip()
                printed = re.match(r"x-[a-z]+:", part) or re.search(r"\(\d+ samples\)", part)  # output lines
                if START.match(part + " ") and not printed:
                    found.append((f"{page.relative_to(REPO)}:{number}", part))
    return found


COMMANDS = documented_commands()
IDS = [f"{where} {command[:60]}" for where, command in COMMANDS]


def words(command: str) -> list[str]:
    """The command's words, up to a here-string, pipe or redirection (what follows is not its arguments)."""
    try:
        parts = shlex.split(command)
    except ValueError:  # an unbalanced quote: a line folded in the docs ('\\' at its end)
        parts = command.split()
    return [p for p in parts[: next((i for i, p in enumerate(parts) if p in ("<<<", "<<", "|", ">", "<")), None)]]


def repository_paths(argv: list[str]) -> list[str]:
    return [a for a in argv if re.match(r"(examples|bench|tests|\.ci)/", a) and "..." not in a]


def test_the_docs_give_commands() -> None:
    assert len(COMMANDS) > 100  # the extraction found the pages' command lines (163 on 2026-11-28)


@pytest.mark.parametrize("where,command", COMMANDS, ids=IDS)
def test_documented_command_names_what_exists(where: str, command: str) -> None:
    argv = words(command)
    program = argv[0]
    if program in ("python", "python3") and argv[1:2] == ["-m"]:
        assert argv[2] in ("pytest", "xdpx.io.cli"), f"{where}: python -m {argv[2]}"
    elif program in ("python", "python3", "bash", "sh"):
        assert (REPO / argv[1]).is_file(), f"{where}: {argv[1]} does not exist"
    elif program == "torchrun":
        assert "--nproc_per_node" in command or "--nproc-per-node" in command, where
    else:
        assert program in PROGRAMS, f"{where}: {program} is no command XDPX installs"
    if program == "x-script" and len(argv) > 1 and not argv[1].startswith("-"):
        assert argv[1] in scripts.names(), f"{where}: x-script {argv[1]} is no registered tool"
    for path in repository_paths(argv[1:]):
        if not path.startswith(MADE_BY_WALKTHROUGH):
            assert (REPO / path).exists(), f"{where}: {path} does not exist"


SCRIPTS = sorted({words(c)[1] for _, c in COMMANDS
                  if words(c)[0] in ("python", "python3") and words(c)[1].endswith(".py")})


@pytest.mark.parametrize("script", SCRIPTS)
def test_documented_python_script_starts_on_a_fresh_install(script: str) -> None:
    done = subprocess.run([sys.executable, script, "--help"], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, f"{script} --help:\n{done.stderr[-2000:]}"
    assert "usage" in done.stdout.lower()


def test_documented_data_sets_exist() -> None:
    sys.path.insert(0, str(REPO / "examples"))
    try:
        import prepare_data  # the script's own list of sets
    finally:
        sys.path.remove(str(REPO / "examples"))
    for where, command in COMMANDS:
        argv = words(command)
        if "examples/prepare_data.py" in argv and "--sets" in argv:
            chosen = argv[argv.index("--sets") + 1].split(",")
            assert set(chosen) <= set(prepare_data.SETS), f"{where}: --sets {','.join(chosen)}"


@pytest.mark.parametrize("script", sorted({words(c)[1] for _, c in COMMANDS if words(c)[0] in ("bash", "sh")}))
def test_documented_shell_script_is_valid(script: str) -> None:
    done = subprocess.run(["bash", "-n", script], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


EXAMPLE_RUNS = [(where, c) for where, c in COMMANDS
                if words(c)[0] in PROGRAMS - {"x-script"} and len(words(c)) > 1
                and re.fullmatch(r"examples/.+\.hjson", words(c)[1])]


def test_example_commands_are_found() -> None:
    assert len(EXAMPLE_RUNS) > 30


@pytest.mark.parametrize("where,command", EXAMPLE_RUNS, ids=[f"{w} {c[:60]}" for w, c in EXAMPLE_RUNS])
def test_documented_example_command_passes_dry(where: str, command: str,
                                               examples_workspace: dict[str, Any]) -> None:  # noqa: F811
    program, config = words(command)[:2]
    expected = "x-prepro" if config in PREPRO else DRY.get(config)
    assert program == expected, f"{where}: {config} is a config of {expected}, not of {program}"
    if config in PREPRO:
        return  # tests/test_examples.py runs it as written, --dry and for real
    ws = examples_workspace["root"]
    # a config written for the full data gets the override tests/test_examples.py gives it on the samples
    typed = str(child_config(ws, config, DRY_OVERRIDES[config])) if config in DRY_OVERRIDES else config
    with inside(ws):
        code, out = run([program, typed, "--dry"])
    assert code == 0, f"{where}: {command} --dry\n{out[-3000:]}"
