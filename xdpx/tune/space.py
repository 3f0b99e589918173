"""space.hjson: one entry per x-train option to search, checked before any trial starts.

    learning_rate: {type: float, values: [1e-4, 1e-2], log: true}
    hidden_size: {type: int, values: [64, 256], step: 64}
    dropout: {type: categorical, values: [0.0, 0.1, 0.2]}

Each entry becomes an Optuna distribution (FloatDistribution, IntDistribution, CategoricalDistribution).
Categorical values that Optuna cannot store (lists, dicts) are stored as their JSON text and turned
back into values when a trial's config is written.
"""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass
from typing import Any

from xdpx.config.errors import ConfigError
from xdpx.config.loader import load_config

TYPES = ("float", "int", "categorical")
ENTRY_KEYS = ("type", "values", "log", "step")
# Options the tuner sets itself for every trial, or that define the budget every trial shares.
NOT_SEARCHABLE = {
    "save_dir": "each trial's save_dir is save_dir/trial_<n> of the study",
    "resume": "x-tune starts every trial afresh and retries interrupted ones itself",
    "overwrite": "x-tune never overwrites a trial", "auto_suffix": "x-tune names the trial folders",
    "train_steps": "the pruner decides where a trial stops",
    "eval_interval": "trials are evaluated every assess_interval updates (tune.hjson)",
    "max_update": "every trial has the same budget: set it in the base config",
    "max_epoch": "every trial has the same budget: set it in the base config",
    "user_dir": "set it in the base config",
}


@dataclass
class Param:
    """One searched option."""

    name: str
    type: str
    values: list[Any]
    log: bool = False
    step: float | int | None = None
    source: str = "space.hjson"  # the file that set this entry, for errors

    def distribution(self) -> Any:
        # lazy: loads optuna
        from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

        if self.type == "float":
            return FloatDistribution(float(self.values[0]), float(self.values[1]), log=self.log,
                                     step=None if self.step is None else float(self.step))
        if self.type == "int":
            return IntDistribution(int(self.values[0]), int(self.values[1]), log=self.log, step=int(self.step or 1))
        return CategoricalDistribution([encode_choice(v) for v in self.values])

    def value(self, stored: Any) -> Any:
        """The config value of a value Optuna stored for this parameter."""
        return decode_choice(stored) if self.type == "categorical" else stored

    def describe(self) -> str:
        if self.type == "categorical":
            return f"one of {self.values}"
        low, high = self.values
        extra = (", log scale" if self.log else "") + (f", step {self.step}" if self.step is not None else "")
        return f"{self.type} in [{low}, {high}]{extra}"

    def corners(self) -> list[Any]:
        """Values that stand for the whole range when checking it against the options."""
        return list(self.values) if self.type == "categorical" else [self.values[0], self.values[1]]


def _is_primitive(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def encode_choice(value: Any) -> Any:
    return value if _is_primitive(value) else "json:" + json.dumps(value, sort_keys=True)


def decode_choice(value: Any) -> Any:
    return json.loads(value[5:]) if isinstance(value, str) and value.startswith("json:") else value


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def parse_entry(name: str, entry: Any, where: str) -> tuple[Param | None, list[str]]:
    """(Param, []) or (None, problems) for one entry of the space file ``where``."""
    at = f"{where}: key '{name}'"
    if not isinstance(entry, dict):
        return None, [f"{at}: expected {{type: float|int|categorical, values: [...]}}, got {entry!r}"]
    problems = []
    for key in entry:
        if key not in ENTRY_KEYS:
            close = difflib.get_close_matches(key, ENTRY_KEYS, n=1)
            problems.append(f"{at}: unknown field '{key}'" + (f". Did you mean '{close[0]}'?" if close else
                                                               f" (fields: {', '.join(ENTRY_KEYS)})"))
    kind = entry.get("type")
    if kind not in TYPES:
        close = difflib.get_close_matches(str(kind), TYPES, n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        problems.append(f"{at}: type {kind!r} is not one of {', '.join(TYPES)}.{hint}")
        return None, problems
    values, log, step = entry.get("values"), entry.get("log", False), entry.get("step")
    if not isinstance(log, bool):
        problems.append(f"{at}: log must be true or false, got {log!r}")
    if kind == "categorical":
        if not isinstance(values, list) or not values:
            problems.append(f"{at}: values must be a non-empty list of choices, got {values!r}")
        if log or step is not None:
            problems.append(f"{at}: log and step apply to float and int entries, not to categorical ones")
        if not problems and len({json.dumps(v, sort_keys=True) for v in values}) != len(values):
            problems.append(f"{at}: values {values!r} repeat a choice")
        return (None, problems) if problems else (Param(name, kind, list(values), source=where), [])

    if not (isinstance(values, list) and len(values) == 2 and all(_number(v) for v in values)):
        problems.append(f"{at}: values must be [low, high] (two numbers), got {values!r}")
        return None, problems
    low, high = values
    if kind == "int" and not all(isinstance(v, int) for v in values):
        problems.append(f"{at}: type int needs integer bounds, got {values!r} (use type: float?)")
    if low >= high:
        problems.append(f"{at}: values [{low}, {high}] is an empty range: low must be below high"
                        + (" (a single value belongs in the base config)" if low == high else ""))
    if log is True and low <= 0:
        problems.append(f"{at}: log: true needs a positive range, got low {low}: raise it above 0 or drop log")
    if step is not None:
        if not _number(step) or step <= 0 or (kind == "int" and not isinstance(step, int)):
            problems.append(f"{at}: step must be a positive {'integer' if kind == 'int' else 'number'}, got {step!r}")
        elif low < high and step > high - low:
            problems.append(f"{at}: step {step} is larger than the range [{low}, {high}]: lower it below {high - low}")
        elif log is True and not (kind == "int" and step == 1):
            problems.append(f"{at}: step cannot be combined with log: true (Optuna samples a log scale continuously)")
        elif kind == "int" and low < high and (high - low) % step:
            problems.append(f"{at}: the range [{low}, {high}] is not a whole number of steps of {step}: "
                            f"set high to {low + (high - low) // step * step}")
        elif kind == "float" and low < high and not math.isclose((high - low) / step, round((high - low) / step)):
            problems.append(f"{at}: the range [{low}, {high}] is not a whole number of steps of {step}")
    return (None, problems) if problems else (Param(name, kind, [low, high], log, step, source=where), [])


def load_space(path: str) -> list[Param]:
    """The parameters of a space file (the config language applies: __parent__, ${}, __def__)."""
    configs = load_config(path)
    if len(configs) != 1:
        raise ConfigError(f"{configs[0].file}: a space file describes one space, this one loops over "
                          f"{len(configs)}: remove the loop from __parent__")
    config = configs[0]
    if not config.values:
        raise ConfigError(f"{config.file}: the space is empty: add at least one option to search, e.g. "
                          "learning_rate: {type: float, values: [1e-4, 1e-2], log: true}")
    params, problems = [], []
    for name, entry in config.values.items():
        where = config.sources.get(name, config.file)
        if name in NOT_SEARCHABLE:
            problems.append(f"{where}: key '{name}' cannot be searched: {NOT_SEARCHABLE[name]}")
            continue
        param, found = parse_entry(name, entry, where)
        problems += found
        if param is not None:
            params.append(param)
    if problems:
        raise ConfigError(problems)
    return params

