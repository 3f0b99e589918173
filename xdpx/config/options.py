"""Option declarations: every option is declared once, next to the component that reads it.

A component lists its options in a class attribute ``options``::

    options = [
        Option('hidden_size', int, default=300, doc='width of the encoder'),
        Option('fp16', bool, default=False, doc='mixed precision',
               children={True: [Option('fp16_init_scale', int, default=128)]}),
        Option('optimizer', str, default='adam', registry=optimizers),
        Rule(lambda a: not (a.overwrite and a.auto_suffix), 'overwrite and auto_suffix exclude each other',
             keys=('overwrite', 'auto_suffix')),
    ]

An option with ``registry`` switches on the options of the component its value names; ``children``
switches on options for particular values. :func:`resolve` walks this tree from a command's root
options, checks a config against what is active and returns :class:`Args`.
"""

from __future__ import annotations

import difflib
import sys
import types
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin

from xdpx import io
from xdpx.config.errors import ConfigError
from xdpx.config.ranges import Range
from xdpx.registry import REGISTRIES

MISSING: Any = type("MISSING", (), {"__repr__": lambda self: "(required)"})()


@dataclass
class Option:
    """One option: name, type, default, doc, validation, and the options a value switches on.

    type: int, float, str, bool, list, dict, list[str], dict[str, str], str | list[str], Any...
        A default of None makes None acceptable too.
    default: a value, or a callable ``f(args) -> value`` computed from the other options
        (document it with ``default_doc``). Without a default the option is required.
    required: the key must be given even though None is allowed (``pretrained_model: null``).
    choices / validate: allowed values / ``f(value) -> bool`` with ``validate_msg`` saying why. A numeric
        option declares its range here: ``validate=at_least(0)`` (see :mod:`xdpx.config.ranges`), which also writes
        ``validate_msg`` and the range shown in the docs.
    children: ``{value: [options]}`` or ``[(predicate, [options])]``: options a value switches on.
    registry: the value names a component of that registry; its ``options`` switch on.
    path: 'input' (must exist), 'output' (must be writable) or None; checked for every path kind.
    aliases: other accepted spellings (the original XDPX's manual's, e.g. a misspelt name old configs use);
        giving both the name and an alias is an error.
    """

    name: str
    type: Any = str
    default: Any = MISSING
    doc: str = ""
    required: bool = False
    choices: Sequence[Any] | None = None
    validate: Callable[[Any], bool] | None = None
    validate_msg: str = "invalid value"
    children: dict[Any, list[Any]] | list[tuple[Callable[[Any], bool], list[Any]]] | None = None
    registry: Any = None
    path: str | None = None
    default_doc: str | None = None
    aliases: Sequence[str] = ()

    def __post_init__(self) -> None:
        if isinstance(self.validate, Range) and self.validate_msg == "invalid value":
            self.validate_msg = f"must be {self.validate.describe(self.type)}"

    @property
    def is_required(self) -> bool:
        return self.required or self.default is MISSING

    def child_groups(self, value: Any) -> list[list[Any]]:
        if self.children is None:
            return []
        if isinstance(self.children, dict):
            return [opts for key, opts in self.children.items() if _same_value(key, value)]
        return [opts for predicate, opts in self.children if predicate(value)]

    def describe_default(self) -> str:
        if self.default_doc is not None:
            return self.default_doc
        if self.default is MISSING:
            return "(required)"
        if callable(self.default):
            return "(computed)"
        return repr(self.default)


@dataclass
class Rule:
    """A check across options, run after every value is known: ``check(args)`` is truthy when fine.

    ``keys`` name the options involved, so the error can say which file set them. ``message`` may be a
    function of the arguments, for a reason only the check knows.
    """

    check: Callable[[Any], Any]
    message: str | Callable[[Any], str]
    keys: tuple[str, ...] = ()


def exclusive(*keys: str) -> Rule:
    """At most one of these boolean-ish options may be set."""
    return Rule(
        lambda a: sum(bool(getattr(a, k, None)) for k in keys) <= 1,
        f"{' and '.join(keys)} exclude each other: set only one",
        keys=keys,
    )


def _same_value(a: Any, b: Any) -> bool:
    # True == 1 in Python; a child switched on by `True` must not fire for the integer 1.
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


# ----------------------------------------------------------------------------------------------------
# types


def type_name(tp: Any) -> str:
    """How a type reads in docs and errors: Optional[int], Union[str, List[str]], List[str]."""
    if tp is Any:
        return "Any"
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        members = [a for a in get_args(tp) if a is not type(None)]
        inner = type_name(members[0]) if len(members) == 1 else f"Union[{', '.join(map(type_name, members))}]"
        return f"Optional[{inner}]" if len(members) < len(get_args(tp)) else inner
    if origin is list:
        return f"List[{type_name(get_args(tp)[0])}]"
    if origin is dict:
        key, value = get_args(tp)
        return f"Dict[{type_name(key)}, {type_name(value)}]"
    if tp is type(None):
        return "None"
    return getattr(tp, "__name__", str(tp))


def matches_type(value: Any, tp: Any) -> bool:
    if tp is Any:
        return True
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        return any(matches_type(value, member) for member in get_args(tp))
    if tp is type(None):
        return value is None
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if origin is list or tp is list:
        args = get_args(tp)
        return isinstance(value, list) and (not args or all(matches_type(v, args[0]) for v in value))
    if origin is dict or tp is dict:
        args = get_args(tp)
        return isinstance(value, dict) and (
            not args or all(matches_type(k, args[0]) and matches_type(v, args[1]) for k, v in value.items())
        )
    return isinstance(value, tp)


def coerce(value: Any, tp: Any) -> Any:
    """Ints given where a float is declared become floats (1 for learning_rate is meant as 1.0)."""
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if get_origin(tp) in (Union, types.UnionType) and float in get_args(tp) and int not in get_args(tp):
        return coerce(value, float)
    return value


# ----------------------------------------------------------------------------------------------------
# the resolved arguments


class Args:
    """Resolved options: attribute access, plus where each value came from and its group."""

    def __init__(self, values: dict[str, Any], declared: dict[str, tuple[Option, str]],
                 explicit: set[str], sources: dict[str, str], origin: str = "config") -> None:
        self.__dict__.update(values)
        object.__setattr__(self, "_declared", declared)
        object.__setattr__(self, "_explicit", explicit)
        object.__setattr__(self, "_sources", sources)
        object.__setattr__(self, "_origin", origin)

    def __getattr__(self, name: str) -> Any:  # only called when the attribute is missing
        if name.startswith("_"):
            raise AttributeError(name)
        close = difflib.get_close_matches(name, list(self.__dict__), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise AttributeError(f"no option {name!r} is active{hint}")

    def __contains__(self, name: str) -> bool:
        return name in self.__dict__

    def __repr__(self) -> str:
        return f"Args({', '.join(f'{k}={v!r}' for k, v in self.items())})"

    def get(self, name: str, default: Any = None) -> Any:
        return self.__dict__.get(name, default)

    def items(self) -> list[tuple[str, Any]]:
        return [(k, v) for k, v in self.__dict__.items() if not k.startswith("_")]

    def as_dict(self) -> dict[str, Any]:
        return dict(self.items())

    def group_of(self, name: str) -> str:
        return self._declared[name][1] if name in self._declared else "other"

    def option(self, name: str) -> Option | None:
        return self._declared[name][0] if name in self._declared else None

    def is_default(self, name: str) -> bool:
        """True when the value equals the declared default (computed defaults count as default)."""
        option = self.option(name)
        if option is None:
            return False
        if name not in self._explicit:
            return True
        return option.default is not MISSING and not callable(option.default) and option.default == self.get(name)

    def source(self, name: str) -> str:
        return self._sources.get(name, "(default)")

    def origin(self) -> str:
        """The config file the user gave (its parents are in :meth:`source`): the one to run again."""
        return str(self.__dict__.get("_origin", "config"))

    def grouped(self) -> dict[str, dict[str, Any]]:
        groups: dict[str, dict[str, Any]] = {}
        for name, value in self.items():
            groups.setdefault(self.group_of(name), {})[name] = value
        return groups

    def non_defaults(self) -> dict[str, Any]:
        return {k: v for k, v in self.items() if not self.is_default(k)}


# ----------------------------------------------------------------------------------------------------
# resolution


_NOTICED: set[tuple[str, str]] = set()


def alias_notice(where: str, alias: str, name: str) -> None:
    """One line on stderr, once per file and spelling per process (a config is resolved more than once)."""
    if (where, alias) not in _NOTICED:
        _NOTICED.add((where, alias))
        print(f"{where}: notice: key '{alias}' is read as '{name}', the preferred name: rename it", file=sys.stderr)


def resolve(config: dict[str, Any], root: Iterable[Any], group: str, sources: dict[str, str] | None = None,
            check_paths: bool = True, origin: str = "config") -> Args:
    """Check ``config`` against the options that ``root`` switches on; return the arguments.

    Every problem is collected, then raised together as one :class:`ConfigError` whose lines name
    the key, the file it came from, what is wrong and the fix.
    """
    config, sources = dict(config), dict(sources or {})  # aliases are renamed in these copies
    alias_keys: set[str] = set()
    errors: list[str] = []
    declared: dict[str, tuple[Option, str]] = {}
    rules: list[Rule] = []
    values: dict[str, Any] = {}

    def where(name: str) -> str:
        return sources.get(name, origin)

    queue: list[tuple[list[Any], str]] = [(list(root), group)]
    while queue:
        options, grp = queue.pop(0)
        for option in options:
            if isinstance(option, Rule):
                rules.append(option)
                continue
            if option.name in declared:
                continue  # the first declaration wins (shared names such as `seed`)
            declared[option.name] = (option, grp)
            for alias in option.aliases:
                if alias not in config:
                    continue
                alias_keys.add(alias)
                if option.name in config:
                    errors.append(f"{where(alias)}: keys '{option.name}' and '{alias}' (another spelling of "
                                  f"'{option.name}') are both set: keep only '{option.name}'")
                else:
                    config[option.name] = config.pop(alias)
                    if alias in sources:
                        sources[option.name] = sources[alias]
                    alias_notice(where(option.name), alias, option.name)
            if option.name in config:
                value = config[option.name]
                if not _type_ok(option, value):
                    errors.append(f"{where(option.name)}: key '{option.name}': expected "
                                  f"{type_name(option.type)}, got {type(value).__name__} {value!r}")
                    continue
                value = coerce(value, option.type)
            elif option.default is MISSING or callable(option.default):
                continue
            else:
                value = option.default
            values[option.name] = value
            if option.registry is not None and value is not None:
                names = value if isinstance(value, list) else [value]  # a list names several components
                unknown = [n for n in names if n not in option.registry]
                for name in unknown:
                    errors.append(f"{where(option.name)}: key '{option.name}': "
                                  f"{option.registry.unknown_message(name)}")
                if unknown:
                    continue
                for name in names:
                    component = option.registry.get(name)
                    queue.append((list(getattr(component, "options", [])), f"{option.registry.family}: {name}"))
            for child_options in option.child_groups(value):
                queue.append((list(child_options), grp))

    for key in config:
        if key not in declared and key not in alias_keys:
            errors.append(_unknown_key_message(key, declared, where(key)))

    for name, (option, _grp) in declared.items():
        if option.required and name not in config and name in values:
            errors.append(f"{origin}: missing required key '{name}' ({type_name(option.type)}): "
                          f"{option.doc or 'add it to the config'}")
            continue
        if name not in values:
            if option.default is not MISSING and callable(option.default):
                continue
            if option.is_required and name not in config:
                errors.append(f"{origin}: missing required key '{name}' ({type_name(option.type)}): "
                              f"{option.doc or 'add it to the config'}")
            continue
        value = values[name]
        if option.choices is not None and value not in option.choices and value is not None:
            close = difflib.get_close_matches(str(value), [str(c) for c in option.choices], n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            errors.append(f"{where(name)}: key '{name}': {value!r} is not allowed.{hint} "
                          f"Choose one of {list(option.choices)}")
        elif option.validate is not None and value is not None and not option.validate(value):
            errors.append(f"{where(name)}: key '{name}': {config.get(name, value)!r}: {option.validate_msg}")
    if errors:
        raise ConfigError(errors)

    args = Args(values, declared, explicit={k for k in config if k in declared}, sources=sources, origin=origin)
    for name, (option, _grp) in declared.items():  # computed defaults see every explicit value
        if name not in values and option.default is not MISSING and callable(option.default):
            object.__setattr__(args, name, option.default(args))
    for rule in rules:
        try:
            ok = rule.check(args)
        except AttributeError:
            ok = True  # the rule's options are not active in this configuration
        if not ok:
            files = sorted({where(k) for k in rule.keys if k in config}) or [origin]
            message = rule.message(args) if callable(rule.message) else rule.message
            errors.append(f"{', '.join(files)}: {message}")
    if check_paths:
        errors.extend(_check_paths(args, declared, where))
    if errors:
        raise ConfigError(errors)
    return args


def _type_ok(option: Option, value: Any) -> bool:
    if value is None and (option.default is None or option.required):
        return True
    return matches_type(value, option.type)


def _unknown_key_message(key: str, declared: dict[str, tuple[Option, str]], where: str) -> str:
    close = difflib.get_close_matches(key, list(declared), n=1, cutoff=0.7)
    if close:
        return f"{where}: unknown key '{key}'. Did you mean '{close[0]}'?"
    owner = _inactive_owner(key)
    if owner:
        return f"{where}: unknown key '{key}': it is an option of {owner}, which this config does not select"
    return f"{where}: unknown key '{key}': no active option has this name (remove it or check the spelling)"


def _inactive_owner(key: str) -> str | None:
    for family, registry in list(REGISTRIES.items()):
        for name, component in registry.items():
            options = getattr(component, "options", None)
            for option in options if isinstance(options, (list, tuple)) else []:
                if isinstance(option, Option) and option.name == key:
                    return f"{family} {name!r}"
    return None


def _check_paths(args: Args, declared: dict[str, tuple[Option, str]], where: Callable[[str], str]) -> list[str]:
    errors = []
    for name, (option, _grp) in declared.items():
        value = args.get(name)
        if option.path == "output" and isinstance(value, str):
            problem = io.output_path_problem(value)
            if problem:
                errors.append(f"{where(name)}: key '{name}': {problem}")
                continue
        if option.path is None or not isinstance(value, str) or not value:
            continue
        try:
            if option.path == "input" and not io.exists(value):
                errors.append(f"{where(name)}: key '{name}': path {value!r} does not exist")
            elif option.path == "output" and not io.is_writable(value):
                errors.append(f"{where(name)}: key '{name}': cannot write to {value!r} (check permissions "
                              "or credentials)")
        # a path the io layer cannot read at all: an unknown scheme such as foo://, or a scheme whose optional
        # backend is missing (xdpx.utils.optional.MissingPackage, an ImportError: its message says what to install)
        except (ValueError, ImportError) as e:
            errors.append(f"{where(name)}: key '{name}': {e}")
    return errors


def walk_options(root: Iterable[Any], group: str, choices: dict[str, Any] | None = None) -> list[tuple[Option, str]]:
    """Every option active for ``choices`` (a partial config), in declaration order, with its group.

    Used by ``x-script options``: without choices, registry options show their default component.
    """
    choices = choices or {}
    seen: dict[str, tuple[Option, str]] = {}
    queue: list[tuple[list[Any], str]] = [(list(root), group)]
    while queue:
        options, grp = queue.pop(0)
        for option in options:
            if isinstance(option, Rule) or option.name in seen:
                continue
            seen[option.name] = (option, grp)
            # a value is known when chosen or when the default is a plain value (None included: a
            # default of null switches on the options declared for null, as resolving a config does);
            # a registry option may hold a list of names (callbacks: [a, b])
            known = option.name in choices or not (option.default is MISSING or callable(option.default))
            value = choices.get(option.name, option.default) if known else None
            for name in value if isinstance(value, list) else [value]:
                if option.registry is not None and name is not None and name in option.registry:
                    component = option.registry.get(name)
                    queue.append((list(getattr(component, "options", [])), f"{option.registry.family}: {name}"))
            if known:
                for child_options in option.child_groups(value):
                    queue.append((list(child_options), grp))
    return list(seen.values())

