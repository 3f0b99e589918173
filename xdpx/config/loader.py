"""Loading hjson configs: ``__parent__`` inheritance, ``${...}`` variables, ``__def__``, ``__ignore__``, loops.

The language (docs/config.md has the full guide with examples):

- A file is one config (a dict) or a list of configs (several runs).
- ``__parent__``: a path, an inline dict, or a list of them, merged in order: a later parent beats an
  earlier one and the child beats every parent. Inside that list, a nested list is a loop: one run per
  alternative. A ``__parent__`` list made only of dicts is itself a loop. Loops multiply (Cartesian
  product) and the FIRST loop varies fastest: ``[base, [lr1, lr2], [bs1, bs2]]`` gives
  (lr1, bs1) (lr2, bs1) (lr1, bs2) (lr2, bs2).
- ``path >> prefix`` prefixes every key of that parent (teacher_ / student_ style).
- Relative parent paths resolve against the folder of the file naming them (then the working
  directory, for paths built from variables such as ``${data_dir}/meta``). The extension is optional.
- ``${name}`` anywhere in a string: ``__def__`` variables first, then config keys, then built-ins
  (``__date__``, ``__gpus__``, ...). A string that is exactly one reference keeps the value's type.
- ``__ignore__``: keys inherited from parents that the child drops.
- Merging is by top-level key: a dict value given by the child replaces the parent's whole dict.

Nothing here executes code from a config: hjson is data (invariant 2 of docs/architecture.md).
"""

from __future__ import annotations

import difflib
import itertools
import os
import posixpath
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from xdpx import io
from xdpx.config import builtins, syntax
from xdpx.config.errors import ConfigError

RESERVED = ("__parent__", "__def__", "__ignore__")
EXTENSIONS = ("", ".hjson", ".json")
_REFERENCE = re.compile(r"\$\{([^{}]+)\}")


@dataclass
class Config:
    """One resolved run: its values, the file each key came from, and the top-level file."""

    values: dict[str, Any]
    sources: dict[str, str]
    file: str


@dataclass
class _Layer:
    """A config before interpolation: values, their source files, variables."""

    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    defs: dict[str, Any] = field(default_factory=dict)
    def_sources: dict[str, str] = field(default_factory=dict)

    def update(self, other: _Layer, prefix: str = "") -> None:
        for key, value in other.values.items():
            self.values[prefix + key] = value
            self.sources[prefix + key] = other.sources[key]
        self.defs.update(other.defs)
        self.def_sources.update(other.def_sources)


# ----------------------------------------------------------------------------------------------------
# reading files


class ConfigFileNotFound(ConfigError):
    """A config path that names no file; ``tried`` holds the paths looked at, in order."""

    def __init__(self, message: str, tried: list[str]) -> None:
        super().__init__(message)
        self.tried = tried


def find_config_file(path: str, base_dir: str | None = None) -> str:
    """The file a config path names: extension optional, relative to ``base_dir`` then to the cwd."""
    path = os.path.expanduser(path)
    candidates = []
    if base_dir is not None and not _is_absolute(path):
        candidates.append(_join(base_dir, path))
    candidates.append(path)
    for candidate in candidates:
        for ext in EXTENSIONS:
            if (not ext or not candidate.endswith(ext)) and io.isfile(candidate + ext):
                return candidate + ext
    tried = [c + e for c in dict.fromkeys(candidates) for e in EXTENSIONS]
    raise ConfigFileNotFound(f"config file {path!r} not found (tried {', '.join(tried)})", tried)


def folder_above_holding(relative: str, file: str, extensions: tuple[str, ...] = EXTENSIONS) -> str | None:
    """The nearest folder above the (local) config ``file``'s own folder from which the relative path
    ``relative`` exists, with one of ``extensions``; None if none does. It points a user who ran a command
    from another folder at the one their relative paths were written for (they resolve from the cwd)."""
    if _is_absolute(relative) or "://" in file or file.startswith("<") or os.path.isabs(relative):
        return None
    folder = os.path.dirname(os.path.abspath(file))
    while os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
        if folder != os.getcwd() and any(os.path.exists(os.path.join(folder, relative + e)) for e in extensions):
            return folder
    return None


def wrong_folder_hint(key: str, relative: str, file: str, extensions: tuple[str, ...] = EXTENSIONS) -> str:
    """`` It exists from FOLDER: ...`` when ``relative`` (the value of ``key``) names a file or folder seen from a
    folder above ``file`` rather than from the working directory; empty otherwise."""
    folder = folder_above_holding(relative, file, extensions)
    if folder is None:
        return ""
    return (f" It exists from {folder}: relative paths of options such as {key} are relative to the working "
            f"directory ({os.getcwd()}), not to the config's folder; run the command from {folder} (cd {folder}), "
            f"or write {key} as an absolute path")


def read_config_file(path: str) -> Any:
    """Parse an hjson/json file; duplicate keys are an error naming the file."""
    with io.open(path, "r") as f:
        text = f.read()
    return parse_hjson(text, path)


STDIN_NAME = "<stdin>"


def read_stdin_config() -> Any:
    """The config given on standard input (``x-prepro - <<EOF``)."""
    text = sys.stdin.read()
    if not text.strip():
        raise ConfigError(f"{STDIN_NAME}: no config on standard input: give it after `-`, e.g.\n"
                          "  x-prepro - <<EOF\n  {data_source: examples/data/sample/reviews, ...}\n  EOF")
    return parse_hjson(text, STDIN_NAME)


def parse_hjson(text: str, name: str = "<string>") -> Any:
    """Parse config text (see xdpx.config.syntax); errors name the file, line and column."""
    try:
        return syntax.loads(text)
    except syntax.SyntaxProblem as e:
        raise ConfigError(f"{name}: {e}") from None


def _is_absolute(path: str) -> bool:
    return "://" in path or os.path.isabs(path)


def _join(base_dir: str, path: str) -> str:
    if "://" in base_dir:
        scheme, rest = base_dir.split("://", 1)
        return f"{scheme}://{posixpath.normpath(posixpath.join(rest, path))}"
    return os.path.normpath(os.path.join(base_dir, path))


def _dirname(path: str) -> str:
    if "://" in path:
        scheme, rest = path.split("://", 1)
        return f"{scheme}://{posixpath.dirname(rest)}"
    return os.path.dirname(os.path.abspath(path))


# ----------------------------------------------------------------------------------------------------
# inheritance and loops


def load_config(path: str, overrides: dict[str, Any] | None = None) -> list[Config]:
    """Every run that a config file describes, resolved and interpolated, in loop order. ``-`` reads
    the config from standard input (relative paths in it are relative to the working directory)."""
    if path == "-":
        return load_node(read_stdin_config(), STDIN_NAME, overrides)
    file = find_config_file(path)
    node = read_config_file(file)
    return load_node(node, file, overrides)


def load_node(node: Any, file: str, overrides: dict[str, Any] | None = None) -> list[Config]:
    """Resolve an already parsed config (a dict or a list of runs) that stands for ``file``."""
    items = node if isinstance(node, list) else [node]
    layers: list[_Layer] = []
    for item in items:
        if isinstance(item, str):
            sub_file = find_config_file(item, _dirname(file))
            layers.extend(_expand(read_config_file(sub_file), sub_file, (sub_file,), _Layer()))
        elif isinstance(item, dict):
            layers.extend(_expand(item, file, (file,), _Layer()))
        else:
            raise ConfigError(f"{file}: a config must be a dict or a list of dicts, got {type(item).__name__}")
    configs = []
    for layer in layers:
        if overrides:
            for key, value in overrides.items():
                layer.values[key] = value
                layer.sources[key] = "command line"
        values = interpolate(layer.values, layer.defs, layer.sources, layer.def_sources)
        configs.append(Config(values=values, sources=dict(layer.sources), file=file))
    return configs


def _expand(node: dict[str, Any], file: str, chain: tuple[str, ...], outer: _Layer) -> list[_Layer]:
    """All alternatives of one config dict, with its parents merged under it.

    ``outer`` holds what the descendants define, so a parent path like ``${data_dir}/meta`` can use a
    value set further down.
    """
    if not isinstance(node, dict):
        raise ConfigError(f"{file}: expected a dict, got {type(node).__name__}")
    own = _Layer()
    for key, value in node.items():
        if key.startswith("__") and key.endswith("__") and key not in RESERVED:
            raise ConfigError(f"{file}: unknown reserved key '{key}'. Reserved keys: {', '.join(RESERVED)}")
        if key not in RESERVED:
            own.values[key] = value
            own.sources[key] = file
    defs = node.get("__def__", {})
    if not isinstance(defs, dict):
        raise ConfigError(f"{file}: key '__def__' must be a dict of variables")
    own.defs = dict(defs)
    own.def_sources = {k: file for k in defs}
    ignore = node.get("__ignore__", [])
    if isinstance(ignore, str):
        ignore = [ignore]

    scope = _Layer()  # what a parent path may refer to: this node, then its descendants
    scope.update(own)
    scope.update(outer)

    alternatives_per_item = [
        _expand_parent_item(item, file, chain, scope) for item in _parent_items(node.get("__parent__"), file)
    ]
    results = []
    # itertools.product varies the LAST item fastest; the documented order is first-fastest.
    for combination in itertools.product(*reversed(alternatives_per_item)):
        merged = _Layer()
        for parent in reversed(combination):
            merged.update(parent)
        for key in ignore:
            merged.values.pop(key, None)
            merged.sources.pop(key, None)
        merged.update(own)
        results.append(merged)
    return results


def _parent_items(parent: Any, file: str) -> list[Any]:
    if parent is None:
        return []
    if isinstance(parent, (str, dict)):
        return [parent]
    if isinstance(parent, list):
        if parent and all(isinstance(p, dict) for p in parent):
            return [parent]  # a list made only of dicts is one loop
        return parent
    raise ConfigError(f"{file}: key '__parent__' must be a path, a dict or a list, got {type(parent).__name__}")


def _expand_parent_item(item: Any, file: str, chain: tuple[str, ...], scope: _Layer) -> list[_Layer]:
    if isinstance(item, list):  # a loop: its alternatives, in order
        alternatives: list[_Layer] = []
        for alternative in item:
            if isinstance(alternative, list):
                raise ConfigError(f"{file}: key '__parent__': a loop cannot directly contain another loop")
            alternatives.extend(_expand_parent_item(alternative, file, chain, scope))
        return alternatives
    if isinstance(item, dict):
        return _expand(item, file, chain, scope)
    if isinstance(item, str):
        written, prefix = (part.strip() for part in item.split(">>", 1)) if ">>" in item else (item, "")
        spec = _interpolate_parent_path(written, file, scope)
        try:
            parent_file = find_config_file(spec, _dirname(file))
        except ConfigFileNotFound as e:
            raise ConfigError(_missing_parent(written, spec, file, scope, e)) from None
        if parent_file in chain:
            raise ConfigError(f"{file}: key '__parent__': inheritance cycle: {' -> '.join(chain + (parent_file,))}")
        layers = _expand(read_config_file(parent_file), parent_file, chain + (parent_file,), scope)
        if not prefix:
            return layers
        prefixed = []
        for layer in layers:
            renamed = _Layer()
            renamed.update(layer, prefix=prefix)
            prefixed.append(renamed)
        return prefixed
    raise ConfigError(f"{file}: key '__parent__': expected a path, a dict or a list, got {item!r}")


def _missing_parent(written: str, spec: str, file: str, scope: _Layer, error: ConfigFileNotFound) -> str:
    """One line for a ``__parent__`` that names no file: the file and key, the path as written and as
    resolved (with the values of the variables it uses and where they were set), where a relative path is
    looked for, and the fix. ``${data_dir}/meta`` gets x-prepro's part: only x-prepro writes meta.hjson."""
    names = [name.strip() for name in _REFERENCE.findall(written)]

    def value_of(name: str) -> str:
        if name in scope.defs:
            return f"{name} = {scope.defs[name]!r} (__def__ in {scope.def_sources.get(name, file)})"
        if name in scope.values:
            return f"{name} = {scope.values[name]!r} (set in {scope.sources.get(name, file)})"
        return name
    resolved = f" resolves to {spec!r} ({'; '.join(value_of(n) for n in names)})" if names else ""
    where = ("" if _is_absolute(os.path.expanduser(spec)) else
             f"; a relative path is looked for in the folder of {file} ({_dirname(file)}), then in the working "
             f"directory ({os.getcwd()})")
    line = (f"{file}: key '__parent__': {written!r}{resolved}: config file {spec!r} not found (tried "
            f"{', '.join(error.tried)}{where}).")
    if "data_dir" in names:
        moved = wrong_folder_hint("data_dir", spec, file)
        if moved:  # the data is there, seen from another folder: the fix is where the command runs
            return line + moved
        return (f"{line} data_dir must be the output folder of x-prepro (it writes meta.hjson there): run x-prepro "
                f"with this data_dir first, or fix data_dir in {scope.sources.get('data_dir', file)}")
    return f"{line} Fix the path (the extension .hjson / .json may be left out)"


def _interpolate_parent_path(spec: str, file: str, scope: _Layer) -> str:
    if "${" not in spec:
        return spec
    sources = {k: scope.sources.get(k, file) for k in scope.values}
    resolved = interpolate({"__parent__": spec, **scope.values}, scope.defs, {"__parent__": file, **sources},
                           scope.def_sources, only="__parent__")
    return resolved["__parent__"]


# ----------------------------------------------------------------------------------------------------
# variables


def interpolate(values: dict[str, Any], defs: dict[str, Any], sources: dict[str, str],
                def_sources: dict[str, str], only: str | None = None) -> dict[str, Any]:
    """Replace every ``${name}`` in ``values`` (at any depth). Undefined names and cycles fail."""
    resolved: dict[tuple[str, str], Any] = {}
    resolving: list[tuple[str, str]] = []

    def lookup(name: str, referrer: str, file: str) -> Any:
        if name in defs:
            return resolve_entry("def", name)
        if name in values:
            return resolve_entry("key", name)
        if name in builtins.BUILTINS:
            return builtins.get(name)
        known = list(defs) + list(values) + list(builtins.BUILTINS)
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" Did you mean '${{{close[0]}}}'?" if close else ""
        raise ConfigError(f"{file}: key '{referrer}': undefined variable '${{{name}}}'.{hint} "
                          "Define it in __def__ or as a config key")

    def resolve_entry(kind: str, name: str) -> Any:
        entry = (kind, name)
        if entry in resolved:
            return resolved[entry]
        file = (def_sources if kind == "def" else sources).get(name, "config")
        label = f"__def__.{name}" if kind == "def" else name
        if entry in resolving:
            cycle = " -> ".join(f"${{{n}}}" for _, n in resolving[resolving.index(entry):] + [entry])
            raise ConfigError(f"{file}: key '{label}': variable cycle {cycle}")
        resolving.append(entry)
        raw = defs[name] if kind == "def" else values[name]
        result = substitute(raw, lambda ref, label=label, file=file: lookup(ref, label, file))
        resolving.pop()
        resolved[entry] = result
        return result

    keys = [only] if only is not None else list(values)
    return {key: resolve_entry("key", key) for key in keys}


def substitute(obj: Any, lookup: Callable[[str], Any]) -> Any:
    """``${name}`` replaced through ``lookup`` in strings nested anywhere in dicts and lists."""
    if isinstance(obj, dict):
        return {k: substitute(v, lookup) for k, v in obj.items()}
    if isinstance(obj, list):
        return [substitute(v, lookup) for v in obj]
    if not isinstance(obj, str) or "${" not in obj:
        return obj
    whole = _REFERENCE.fullmatch(obj.strip())
    if whole:
        return lookup(whole.group(1).strip())  # exactly one reference keeps the value's type
    return _REFERENCE.sub(lambda m: _to_text(lookup(m.group(1).strip())), obj)


def _to_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)
