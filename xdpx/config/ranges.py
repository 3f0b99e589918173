"""The ranges of numeric options: what a number may be, checked before any work and shown in the docs.

A numeric option declares one as its ``validate`` (``Option("dropout", float, validate=in_range(0, 1,
high_open=True))``); :class:`xdpx.config.options.Option` takes its message from it. Every numeric option
of every command and component declares one (tests/config/test_option_ranges.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, get_args, get_origin


@dataclass(frozen=True)
class Range:
    """The allowed values of a numeric option, given as its ``validate``; build one with :func:`at_least`,
    :func:`above`, :func:`in_range`, :func:`exactly` or :func:`any_number`, and ``a | b`` for either.

    A number must lie in the interval (NaN and infinities never do); a list value must have
    ``min_items``..``max_items`` items, each in range; a dict value must have every value in range.
    ``kind`` (int or float) limits an interval to numbers of that type, for ``int | float`` options whose
    two types mean different things. Every numeric option declares one (tests/config/test_option_ranges.py),
    so an out-of-range value stops the command before any work, naming the key, its file and the range.
    """

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    kind: type | None = None
    min_items: int = 0
    max_items: int | None = None
    others: tuple[Range, ...] = ()  # `a | b`: the numbers of b are allowed too

    def __or__(self, other: Range) -> Range:
        return replace(self, others=(*self.others, replace(other, others=()), *other.others))

    def _holds(self, number: Any) -> bool:
        if isinstance(number, bool) or not isinstance(number, (int, float)) or not math.isfinite(number):
            return False
        if self.kind is not None and not isinstance(number, self.kind):
            return False
        if self.low is not None and (number <= self.low if self.low_open else number < self.low):
            return False
        return self.high is None or (number < self.high if self.high_open else number <= self.high)

    def holds(self, number: Any) -> bool:
        """Whether one number is in range (any interval of ``a | b``)."""
        return self._holds(number) or any(other._holds(number) for other in self.others)

    def __call__(self, value: Any) -> bool:
        if isinstance(value, list):
            longest = self.max_items if self.max_items is not None else len(value)
            return self.min_items <= len(value) <= longest and all(self.holds(v) for v in value)
        if isinstance(value, dict):  # values may be numbers or lists of them (BERT's pruned_heads)
            return all(self(v) if isinstance(v, list) else self.holds(v) for v in value.values())
        return self.holds(value)

    def _interval(self) -> str:
        kind = _KIND_WORDS.get(self.kind, "")
        low, high = _number(self.low), _number(self.high)
        if self.low is not None and self.high is not None:
            if self.low == self.high:
                return f"{kind}{low}"
            text = f"in {'(' if self.low_open else '['}{low}, {high}{')' if self.high_open else ']'}"
        elif self.low is not None:
            text = f"{'>' if self.low_open else '>='} {low}"
        elif self.high is not None:
            text = f"{'<' if self.high_open else '<='} {high}"
        else:
            return _ANY_OF_KIND.get(self.kind, "a finite number")
        return f"{kind}{text}"

    def describe(self, tp: Any = None) -> str:
        """The range in words, e.g. ``>= 0``, ``-1 or > 0``, ``a list of 2 numbers, each in [0, 1)``;
        ``tp`` is the option's type (a list or dict type describes its items)."""
        numbers = " or ".join(r._interval() for r in (self, *self.others))
        integers = _numeric_members(tp) == {int}
        if numbers == "a finite number" and integers:
            numbers = "an integer"
        origin = get_origin(tp) or tp
        if origin is list:
            noun = "integers" if integers else "numbers"
            if self.max_items is not None and self.max_items == self.min_items:
                count = f"a list of {self.min_items} {noun}"
            elif self.min_items == 1:
                count = f"a non-empty list of {noun}"
            else:
                count = f"a list of at least {self.min_items} {noun}" if self.min_items else f"a list of {noun}"
            return f"{count}, each {numbers}"
        if origin is dict:
            return f"a mapping whose values are each {numbers}"
        return numbers


def _numeric_members(tp: Any) -> set[Any]:
    """int and/or float: the number types of an option type (int | None -> {int})."""
    if tp in (int, float):
        return {tp}
    return {member for arg in get_args(tp) for member in _numeric_members(arg)}


_KIND_WORDS: dict[Any, str] = {int: "an integer ", float: "a float "}
_ANY_OF_KIND: dict[Any, str] = {int: "an integer", float: "a finite float"}


def _number(value: float | None) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def at_least(low: float, **more: Any) -> Range:
    """``>= low`` (counts: ``at_least(0)``, ``at_least(1)``)."""
    return Range(low=low, **more)


def above(low: float, **more: Any) -> Range:
    """``> low`` (learning rates, epsilons: ``above(0)``)."""
    return Range(low=low, low_open=True, **more)


def in_range(low: float, high: float, low_open: bool = False, high_open: bool = False, **more: Any) -> Range:
    """``[low, high]``, an end excluded with ``low_open`` / ``high_open`` (probabilities: ``in_range(0, 1)``)."""
    return Range(low=low, high=high, low_open=low_open, high_open=high_open, **more)


def exactly(value: float) -> Range:
    """One special value, joined to a range with ``|``: ``exactly(-1) | above(0)``."""
    return Range(low=value, high=value)


def any_number(**more: Any) -> Range:
    """Any finite number: an option whose every value means something (a seed offset, a score, a
    column counted from the end) still declares that it was considered."""
    return Range(**more)
