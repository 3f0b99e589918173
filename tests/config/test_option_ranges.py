"""Every numeric option of xdpx declares its range (``validate=at_least(0)`` ... from xdpx.config.options),
so an out-of-range value stops a command before any work; a new int / float option cannot land without one.

The walk covers what ``x-script options_docs`` documents: every built-in command, every value that switches
child options on, and every built-in component of every registry (reachable from a command or not).
Components registered by tests or user_dir are left out: their options are their authors' business.
"""

from __future__ import annotations

import math
import types
from typing import Any, Union, get_args, get_origin

import pytest

from xdpx.command import COMMON_OPTIONS, commands, get_command
from xdpx.config.errors import ConfigError
from xdpx.config.options import MISSING, Option, resolve
from xdpx.config.ranges import Range, above, any_number, at_least, exactly, in_range
from xdpx.registry import REGISTRIES


def is_numeric(tp: Any) -> bool:
    """int or float, alone, optional, in a union, or as the items of a list / values of a dict."""
    if tp in (int, float):
        return True
    if get_origin(tp) in (Union, types.UnionType, list, dict):
        return any(is_numeric(arg) for arg in get_args(tp))
    return False


def builtin(component: Any) -> bool:
    return getattr(component, "__module__", "").startswith("xdpx.")


def builtin_options() -> dict[int, tuple[Option, str]]:
    """Every option declared by xdpx itself, by identity, with where it was found."""
    found: dict[int, tuple[Option, str]] = {}

    def visit(options: Any, where: str) -> None:
        for option in options or []:
            if not isinstance(option, Option) or id(option) in found:
                continue
            found[id(option)] = (option, where)
            if isinstance(option.children, dict):
                groups = list(option.children.values())
            else:
                groups = [children for _predicate, children in option.children or []]
            for children in groups:
                visit(children, where)
            if option.registry is not None:
                for name in option.registry.names():
                    component = option.registry.get(name)
                    if builtin(component):
                        visit(getattr(component, "options", []), f"{option.registry.family} {name!r}")

    visit(COMMON_OPTIONS, "every command")
    for name in commands.names():
        if builtin(commands.get(name)):
            visit(get_command(name).options(), name)
    for family, registry in list(REGISTRIES.items()):  # components no command option reaches
        for name in registry.names():
            component = registry.get(name)
            options = getattr(component, "options", None)
            if builtin(component) and isinstance(options, (list, tuple)):
                visit(options, f"{family} {name!r}")
    return found


NUMERIC = sorted(((o, where) for o, where in builtin_options().values() if is_numeric(o.type)),
                 key=lambda item: (item[1], item[0].name))


def test_the_walk_finds_the_numeric_options() -> None:
    names = {option.name for option, _ in NUMERIC}
    assert len(NUMERIC) > 100, len(NUMERIC)  # a broken walk must not pass vacuously
    assert {"tolerance", "learning_rate", "max_len", "adam_betas", "warmup_steps", "cull_keep_ratio",
            "max_predict", "mask_prob", "data_size", "opset_version"} <= names


def test_every_numeric_option_declares_a_range() -> None:
    missing = [f"{where}: {option.name} ({option.type})" for option, where in NUMERIC
               if not isinstance(option.validate, Range)]
    assert not missing, ("numeric options without a declared range (give each validate=at_least(...) / "
                         "above / in_range / exactly / any_number from xdpx.config.options):\n" + "\n".join(missing))


@pytest.mark.parametrize("option", [o for o, _ in NUMERIC], ids=[f"{w}: {o.name}" for o, w in NUMERIC])
def test_every_default_lies_in_its_range(option: Option) -> None:
    default = option.default
    if default is MISSING or default is None or callable(default):
        return
    assert option.validate(default), f"{option.name}: default {default!r} is not {option.validate_msg}"
    assert option.validate_msg.startswith("must be ")  # the message states the range


def test_a_range_words_its_values_for_errors_and_docs() -> None:
    assert at_least(0).describe(int) == ">= 0"
    assert above(0).describe(float) == "> 0"
    assert in_range(0, 1, high_open=True).describe(float) == "in [0, 1)"
    assert (exactly(-1) | at_least(1)).describe(int) == "-1 or >= 1"
    assert any_number().describe(int) == "an integer"
    assert at_least(1, min_items=1).describe(list[int]) == "a non-empty list of integers, each >= 1"
    assert in_range(0, 1, high_open=True, min_items=2, max_items=2).describe(list[float]) == \
        "a list of 2 numbers, each in [0, 1)"
    warmup = at_least(0, kind=int) | in_range(0, 1, high_open=True, kind=float)
    assert warmup.describe(int | float) == "an integer >= 0 or a float in [0, 1)"
    assert Option("n", int, default=1, validate=at_least(0)).validate_msg == "must be >= 0"


def test_a_range_holds_its_values_and_nothing_else() -> None:
    assert at_least(1)(1) and not at_least(1)(0)
    assert above(0)(1e-9) and not above(0)(0.0)
    assert in_range(0, 1)(1.0) and not in_range(0, 1, high_open=True)(1.0)
    assert (exactly(-1) | at_least(1))(-1) and not (exactly(-1) | at_least(1))(0)
    for value in (math.nan, math.inf, -math.inf):  # a JSON config may hold NaN; no range holds it
        assert not any_number()(value) and not at_least(0)(value)
    warmup = at_least(0, kind=int) | in_range(0, 1, high_open=True, kind=float)
    assert warmup(100) and warmup(0.1) and not warmup(1.5) and not warmup(-1)
    betas = in_range(0, 1, high_open=True, min_items=2, max_items=2)
    assert betas([0.9, 0.999]) and not betas([0.9]) and not betas([0.9, 1.0])
    assert at_least(0)({"train": 3, "dev": 0}) and not at_least(0)({"train": -1})


def test_an_out_of_range_value_names_the_key_the_file_and_the_range() -> None:
    root = [Option("tolerance", int, default=None, validate=at_least(1), doc="evaluations"),
            Option("dropout", float, default=0.1, validate=in_range(0, 1, high_open=True), doc="p")]
    with pytest.raises(ConfigError) as e:
        resolve({"tolerance": -1, "dropout": math.nan}, root, "g", sources={"tolerance": "/cfg/train.hjson"},
                origin="/cfg/other.hjson")
    text = str(e.value)
    assert "/cfg/train.hjson: key 'tolerance': -1: must be >= 1" in text
    assert "/cfg/other.hjson: key 'dropout': nan: must be in [0, 1)" in text
    assert resolve({"tolerance": None}, root, "g").tolerance is None  # null stays allowed where it was
