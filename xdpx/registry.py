"""One generic registry for every family of components (models, losses, optimizers, ...).

A family is created once with :func:`Registry`, and components join it with a decorator::

    models = Registry('model')

    @models.register('cls_cnn')
    class TextCNN(Model):
        options = [Option('hidden_size', int, default=300, doc='...')]

Choosing ``model: cls_cnn`` in a config activates the options that ``TextCNN`` declares (see
:mod:`xdpx.config.options`). A failed lookup lists what exists and suggests the closest name.
"""

from __future__ import annotations

import difflib
import importlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

# Every registry by family name, so tools (x-script options, docs) can enumerate them.
REGISTRIES: dict[str, Registry] = {}


class RegistryError(KeyError):
    """An unknown component name; the message lists the available ones."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class Registry:
    """Maps names to components of one family.

    ``modules`` lists the modules that define the built-in components; they are imported on the
    first lookup, not at import time, so importing xdpx stays cheap (invariant 9 of docs/architecture.md).
    """

    def __init__(self, family: str, modules: tuple[str, ...] = ()) -> None:
        if family in REGISTRIES:
            raise ValueError(f"registry {family!r} already exists")
        self.family = family
        self._modules = modules
        self._loaded = False
        self._entries: dict[str, Any] = {}
        REGISTRIES[family] = self

    def register(self, name: str) -> Callable[[T], T]:
        def decorator(component: T) -> T:
            if name in self._entries and self._entries[name] is not component:
                raise ValueError(f"{self.family} {name!r} is registered twice")
            self._entries[name] = component
            component.registered_name = name  # type: ignore[attr-defined]
            return component

        return decorator

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True
            for module in self._modules:
                importlib.import_module(module)

    def get(self, name: str) -> Any:
        self._load()
        if name not in self._entries:
            raise RegistryError(self.unknown_message(name))
        return self._entries[name]

    def unknown_message(self, name: object) -> str:
        self._load()
        names = sorted(self._entries)
        close = difflib.get_close_matches(str(name), names, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        return f"unknown {self.family} {name!r}.{hint} Available: {', '.join(names) or '(none)'}"

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._entries

    def names(self) -> list[str]:
        self._load()
        return sorted(self._entries)

    def items(self) -> Iterator[tuple[str, Any]]:
        self._load()
        return iter(sorted(self._entries.items()))


def load_user_dir(path: str) -> None:
    """Import a user's package of components (the ``user_dir`` option).

    Importing runs the user's registration decorators; it happens only because the user named the
    folder in a config, never implicitly.
    """
    path = os.path.abspath(os.path.expanduser(path))
    if not os.path.isdir(path):
        raise FileNotFoundError(f"user_dir {path!r} is not a directory")
    parent, name = os.path.split(path.rstrip(os.sep))
    if parent not in sys.path:
        sys.path.insert(0, parent)
    importlib.import_module(name)


def load_entry_points() -> None:
    """Import installed plugins that declare the ``xdpx.plugins`` entry point group."""
    # lazy: importlib.metadata (~40 ms): only when plugins are loaded; import xdpx stays light
    from importlib.metadata import entry_points

    for entry in entry_points(group="xdpx.plugins"):
        entry.load()
