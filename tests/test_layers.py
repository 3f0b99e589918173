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
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

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
