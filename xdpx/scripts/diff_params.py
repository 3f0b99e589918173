"""``x-script diff_params A B``: the options that differ between two runs, or a run and a config.

A and B are each a run directory (its args.py) or an x-train config file, resolved exactly as x-train
would resolve it (``__parent__``, defaults, the options the chosen components switch on). Prints one
line per differing option, ``name: A -> B`` (``(absent)`` when a side does not have it).
"""

from __future__ import annotations

from typing import Any

from xdpx import io
from xdpx.chain import resolve_runs
from xdpx.command import script
from xdpx.config.errors import ConfigError
from xdpx.config.writers import read_args
from xdpx.errors import UserError
from xdpx.io.credentials import redact


def resolved_options(path: str) -> dict[str, Any]:
    """The flat options of a run directory or of an x-train config file."""
    if io.isdir(path):
        args_path = io.join(path, "args.py")
        if not io.exists(args_path):
            raise UserError(f"diff_params: {path} is a folder without args.py: give a run directory or a config file")
        return read_args(args_path)
    if not io.exists(path):
        raise UserError(f"diff_params: {path} does not exist (a run directory or an x-train config file)")
    runs = resolve_runs("x-train", path)
    if len(runs) > 1:
        raise UserError(f"diff_params: {path} describes {len(runs)} runs (loops); compare one run's config")
    return runs[0].as_dict()


def _show(value: Any) -> str:
    return value if value == "(absent)" else repr(redact(value))  # a credential in an option: masked


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    absent = object()
    names = list(a) + [k for k in b if k not in a]
    found = []
    for name in names:
        left, right = a.get(name, absent), b.get(name, absent)
        if left != right:
            found.append((name, "(absent)" if left is absent else left, "(absent)" if right is absent else right))
    return found


USAGE = "usage: x-script diff_params A B (each a run directory or an x-train config file)"


@script("diff_params")
def main(argv: list[str]) -> int:
    """Options that differ between two runs, or a run and an x-train config: x-script diff_params A B."""
    if len(argv) != 2:
        raise ConfigError(USAGE)
    found = differences(resolved_options(argv[0]), resolved_options(argv[1]))
    if not found:
        print(f"no differences between {argv[0]} and {argv[1]}")
        return 0
    print(f"# {len(found)} option(s) differ: A = {argv[0]}, B = {argv[1]}")
    width = max(len(name) for name, _, _ in found)
    for name, left, right in found:
        print(f"{name.ljust(width)}  {_show(left)} -> {_show(right)}")
    return 0
