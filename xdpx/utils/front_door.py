"""The front door of a workflow package (docs/architecture.md, "Rooms"): its ``PUBLIC`` names, each loaded
from its module on first use, so importing one module of the package loads no other one."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any


def front_door(package: str, public: dict[str, str]) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for ``package`` that serves the names of ``public`` (name -> module)."""

    def __getattr__(name: str) -> Any:
        if name not in public:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(f"{package}.{public[name]}"), name)

    return __getattr__
