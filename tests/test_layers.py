"""The floors of the package (docs/architecture.md, "Floors"): a module imports only from its own floor or
the floors below, so no import circle can run through the CLI again.

Every ``import`` of an xdpx module counts, at module level and inside functions alike: a deferred import
is still a dependency. The floors, bottom to top:

0. base: ``xdpx.errors``, ``xdpx.config.errors``, ``xdpx.logger``, ``xdpx.utils`` (import nothing of
   xdpx above themselves);
1. core: ``xdpx.registry``, ``xdpx.config``, ``xdpx.io``, ``xdpx.command`` (the command interface and
   the registries, which name command modules by string and import none of them);
2. components: ``xdpx.data``, ``xdpx.models``, ``xdpx.losses``, ``xdpx.metrics``, ``xdpx.optim``,
   ``xdpx.tasks``;
3. runtime: ``xdpx.runtime`` (what training and inference both run on: devices and processes, precision,
   seeding, compiling, out-of-memory, the shared evaluation and prediction, a run's files read back);
4. workflows: ``xdpx.train``, ``xdpx.inference``, ``xdpx.export``, ``xdpx.serve``, ``xdpx.viz``,
   ``xdpx.tune``, ``xdpx.debug``;
5. tools: ``xdpx.chain`` (the dispatcher), ``xdpx.scripts`` (x-script tools), ``xdpx.submit``;
6. entry points: ``xdpx.cli`` and ``xdpx.__main__``, imported by nothing in the package.

Three more rules (docs/architecture.md, "Rooms"):

- each FLOORS entry is a *room*; the rooms' import graph has no circle outside the components' floor;
- a workflow imports another workflow only through that workflow's package: names its ``__init__.py``
  lists in ``PUBLIC`` (``from xdpx.viz import plot_run``), never one of its modules (``xdpx.viz.command``);
- an import inside a function says why it is there: ``# lazy: <reason>`` on its first line or on the line
  above (a heavy or optional package, or a command's start-up kept light). Checked per top-level entry of
  the package, so a failure names the room to fix.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "xdpx"

# the longest matching prefix decides a module's floor
FLOORS = {
    "xdpx.errors": 0, "xdpx.config.errors": 0, "xdpx.logger": 0, "xdpx.utils": 0,
    "xdpx": 1, "xdpx.registry": 1, "xdpx.config": 1, "xdpx.io": 1, "xdpx.command": 1,
    "xdpx.data": 2, "xdpx.models": 2, "xdpx.losses": 2, "xdpx.metrics": 2, "xdpx.optim": 2, "xdpx.tasks": 2,
    "xdpx.runtime": 3,
    "xdpx.train": 4, "xdpx.inference": 4, "xdpx.export": 4, "xdpx.serve": 4, "xdpx.viz": 4, "xdpx.tune": 4,
    "xdpx.debug": 4,
    "xdpx.chain": 5, "xdpx.scripts": 5, "xdpx.submit": 5,
    "xdpx.cli": 6, "xdpx.__main__": 6,
}
FLOOR_NAMES = ["base", "core", "components", "runtime", "workflows", "tools", "entry points"]


def floor_of(module: str) -> int:
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in FLOORS:
            return FLOORS[prefix]
    raise AssertionError(f"{module}: not on any floor; add its package to FLOORS and to docs/architecture.md")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every xdpx import in a file; ``from xdpx import io`` counts as ``xdpx.io``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "xdpx"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "xdpx":
                found += [(node.lineno, f"xdpx.{a.name}") for a in node.names]
            elif node.module.startswith("xdpx."):
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.ImportFrom) and node.level > 0:  # relative: resolve against the package
            package = module_name(path).split(".")
            package = package if path.name == "__init__.py" else package[:-1]
            base = package[: len(package) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
            found.append((node.lineno, target))
    return found


def upward_imports() -> list[str]:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = module_name(path)
        for line, target in imported_modules(path):
            if floor_of(target) > floor_of(source):
                problems.append(f"{path.relative_to(ROOT)}:{line}: {source} ({FLOOR_NAMES[floor_of(source)]}) "
                                f"imports {target} ({FLOOR_NAMES[floor_of(target)]})")
    return problems


def test_no_module_imports_a_higher_floor() -> None:
    assert upward_imports() == []


def test_every_module_is_on_a_floor() -> None:
    for path in PACKAGE.rglob("*.py"):
        floor_of(module_name(path))


def test_the_check_sees_deferred_and_relative_imports(tmp_path: Path) -> None:
    # the checker itself must not be blind: a function-level import and a relative one are both found
    package = tmp_path / "xdpx" / "data"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    module = package / "m.py"
    module.write_text("def f():\n    from xdpx.cli import run_chain\n\nfrom ..train import loop\n")
    found = sorted(target for _, target in imported_modules_under(tmp_path, module))
    assert found == ["xdpx.cli", "xdpx.train"]
    assert all(floor_of(t) > floor_of("xdpx.data.m") for t in found)


def imported_modules_under(root: Path, path: Path) -> list[tuple[int, str]]:
    global ROOT
    saved, ROOT = ROOT, root
    try:
        return imported_modules(path)
    finally:
        ROOT = saved


def test_every_module_imports_with_the_cli_blocked() -> None:
    """Import each module in a fresh interpreter where ``import xdpx.cli`` fails: only the CLI needs it."""
    modules = [module_name(p) for p in sorted(PACKAGE.rglob("*.py")) if module_name(p) not in ("xdpx.cli", "xdpx.__main__")]
    # optional extras (tensorflow, onnx, uvicorn ...) are imported lazily inside functions, so every module
    # imports without them; a module that needs an extra at import time would show up here too
    code = ("import importlib, sys; sys.modules['xdpx.cli'] = None; failed = []\n"
            f"for name in {modules!r}:\n"
            "    try:\n        importlib.import_module(name)\n"
            "    except Exception as e:\n        failed.append(f'{name}: {type(e).__name__}: {e}')\n"
            "print('\\n'.join(failed))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


# --- rooms -----------------------------------------------------------------------------------------------

WORKFLOWS = sorted(name for name, floor in FLOORS.items() if FLOOR_NAMES[floor] == "workflows")


def room_of(module: str) -> str:
    """The FLOORS entry a module belongs to (the longest matching prefix)."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in FLOORS:
            return ".".join(parts[:end])
    raise AssertionError(f"{module}: not in any room; add its package to FLOORS and to docs/architecture.md")


def import_sites(path: Path) -> list[tuple[ast.stmt, str, list[str], bool]]:
    """(node, module, imported names, inside a function) of every import in a file, any package; relative
    imports resolved against the package, ``from xdpx import io`` kept as module ``xdpx`` with name io."""
    tree = ast.parse(path.read_text(), str(path))
    in_function = {id(inner) for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                   for inner in ast.walk(node) if inner is not node}
    sites = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            sites += [(node, alias.name, [], id(node) in in_function) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level > 0:
                package = module_name(path).split(".")
                package = package if path.name == "__init__.py" else package[:-1]
                module = ".".join(package[: len(package) - (node.level - 1)] + ([module] if module else []))
            sites.append((node, module, [alias.name for alias in node.names], id(node) in in_function))
    return sites


def public_names(workflow: str) -> dict[str, str]:
    """``PUBLIC`` of a workflow's ``__init__.py``: name -> the module (relative to the package) defining it."""
    init = PACKAGE.joinpath(*workflow.split(".")[1:], "__init__.py")
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["PUBLIC"]:
            return ast.literal_eval(node.value)
    return {}


def is_submodule(package: str, name: str) -> bool:
    folder = PACKAGE.joinpath(*package.split(".")[1:])
    return (folder / f"{name}.py").exists() or (folder / name / "__init__.py").exists()


def workflow_internals_imported() -> list[str]:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = room_of(module_name(path))
        if source not in WORKFLOWS:
            continue
        for node, module, names, _ in import_sites(path):
            if not module.startswith("xdpx"):
                continue
            if module == "xdpx":  # from xdpx import viz: the package object, whose internals are then open
                targets = [f"xdpx.{n}" for n in names if f"xdpx.{n}" in WORKFLOWS and f"xdpx.{n}" != source]
                problems += [f"{path.relative_to(ROOT)}:{node.lineno}: imports the package {t} itself: "
                             f"import the names it offers instead (from {t} import ...)" for t in targets]
                continue
            target = room_of(module)
            if target not in WORKFLOWS or target == source:
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}: {source} imports"
            init = f"{target.replace('.', '/')}/__init__.py"
            if module != target or not names:
                problems.append(f"{where} {module}, an internal module of {target}: import a name that "
                                f"{init} lists in PUBLIC (from {target} import ...)")
                continue
            public = public_names(target)
            for name in names:
                if name not in public or is_submodule(target, name):
                    problems.append(f"{where} {name!r} from {target}, which is not in the PUBLIC of "
                                    f"{init} (it offers: {', '.join(sorted(public)) or 'nothing'})")
    return problems


def test_no_workflow_imports_another_workflows_internals() -> None:
    assert workflow_internals_imported() == []


def test_every_public_name_is_defined_where_its_package_says() -> None:
    for workflow in WORKFLOWS:
        for name, module in public_names(workflow).items():
            path = PACKAGE.joinpath(*workflow.split(".")[1:], *module.split(".")).with_suffix(".py")
            defined = set()
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    defined.add(node.name)
                elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    defined.update(t.id for t in targets if isinstance(t, ast.Name))
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    defined.update((a.asname or a.name).split(".")[0] for a in node.names)
            assert name in defined, f"{workflow}/__init__.py: PUBLIC names {name!r} from {module}, which does not define it"


def room_graph() -> dict[str, dict[str, str]]:
    """room -> {room it imports: the first place it does}."""
    graph: dict[str, dict[str, str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        source = room_of(module_name(path))
        for line, target in imported_modules(path):
            if room_of(target) != source:
                graph.setdefault(source, {}).setdefault(room_of(target), f"{path.relative_to(ROOT)}:{line}")
    return graph


def circles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """The strongly connected groups of more than one room (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(room: str) -> None:
        index[room] = low[room] = len(index)
        stack.append(room)
        for other in graph.get(room, {}):
            if other not in index:
                visit(other)
                low[room] = min(low[room], low[other])
            elif other in stack:
                low[room] = min(low[room], index[other])
        if low[room] == index[room]:
            group = []
            while True:
                other = stack.pop()
                group.append(other)
                if other == room:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for room in sorted(graph):
        if room not in index:
            visit(room)
    return found


def test_no_circle_between_rooms_above_the_components() -> None:
    # The components (data, models, losses, metrics) still import each other both ways; every floor
    # above them is a one-way street: runtime, the workflows, the tools and the entry points.
    graph = room_graph()
    bad = [group for group in circles(graph) if any(floor_of(room) != FLOORS["xdpx.data"] for room in group)]
    assert bad == [], [[f"{a} -> {b} ({graph[a][b]})" for a in g for b in g if b in graph.get(a, {})] for g in bad]


def test_the_circle_check_finds_a_circle() -> None:
    graph = {"xdpx.train": {"xdpx.tune": "a"}, "xdpx.tune": {"xdpx.train": "b"}, "xdpx.viz": {"xdpx.train": "c"}}
    assert circles(graph) == [["xdpx.train", "xdpx.tune"]]


def top_level_entries() -> list[str]:
    return sorted(p.name for p in PACKAGE.iterdir()
                  if (p.suffix == ".py" or (p / "__init__.py").exists()) and p.name != "__pycache__")


def unexplained_deferred_imports(entry: Path) -> list[str]:
    problems = []
    for path in sorted(entry.rglob("*.py")) if entry.is_dir() else [entry]:
        lines = path.read_text().splitlines()
        for node, _, _, in_function in import_sites(path):
            if not in_function:
                continue
            first = lines[node.lineno - 1]
            above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
            reason = first.partition("# lazy:")[2] or (above.partition("# lazy:")[2] if above.startswith("#") else "")
            if not reason.strip():
                problems.append(f"{path.relative_to(ROOT)}:{node.lineno}: {first.strip()}")
    return problems


@pytest.mark.parametrize("entry", top_level_entries())
def test_every_import_inside_a_function_says_why(entry: str) -> None:
    """An import inside a function carries ``# lazy: <reason>`` on its first line or the line above it;
    any other import belongs at the top of its file, where a reader sees the module's dependencies."""
    problems = unexplained_deferred_imports(PACKAGE / entry)
    assert problems == [], (f"{len(problems)} imports inside functions without '# lazy: <reason>' (move each to the "
                            "top of its file, or say why it waits):\n" + "\n".join(problems))


def test_the_lazy_check_reads_the_comment_and_the_line_above(tmp_path: Path) -> None:
    folder = tmp_path / "xdpx" / "viz"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    (folder / "m.py").write_text("import os\n\n\ndef f():\n    import json\n    import csv  # lazy: why\n"
                                 "    # lazy: matplotlib is heavy\n    from xdpx.viz import plots\n"
                                 "    import re  # lazy:\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        found = unexplained_deferred_imports(folder)
    finally:
        ROOT = saved
    assert found == ["xdpx/viz/m.py:5: import json", "xdpx/viz/m.py:9: import re  # lazy:"]
