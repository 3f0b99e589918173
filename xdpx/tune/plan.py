"""The study plan: the three files read and checked, and the x-train config of each trial.

Everything here runs before any trial starts (and is all that ``--dry`` does): the space is checked
against the base config's options like any config (did-you-mean, types, conditional options), and a
problem is a ConfigError naming the file and the key.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import hjson

from xdpx import io
from xdpx.command import COMMON_OPTIONS, get_command
from xdpx.config.errors import ConfigError
from xdpx.config.loader import Config, find_config_file, load_config
from xdpx.config.options import Args, resolve
from xdpx.io.credentials import redact
from xdpx.runtime.run_files import match_subsets
from xdpx.tune.space import Param, load_space

TRIALS_PREFIX = "trial_"
CONFIGS_DIR = "configs"


def trial_dir(save_dir: str, number: int) -> str:
    return io.join(save_dir, f"{TRIALS_PREFIX}{number}")


def trial_config_path(save_dir: str, number: int) -> str:
    return io.join(save_dir, CONFIGS_DIR, f"{TRIALS_PREFIX}{number}.hjson")


@dataclass
class TunePlan:
    """A checked study: tune options, search space, base config and what trials share."""

    args: Args
    params: list[Param]
    base: Config
    base_args: Args
    update_size: int  # samples per update of the base config: the unit of assessment steps
    total_updates: int  # updates of a trial that runs to the end (the largest budget)

    @property
    def direction(self) -> str:
        return "maximize" if self.base_args.ascending_metric else "minimize"

    def distributions(self) -> dict[str, Any]:
        return {p.name: p.distribution() for p in self.params}

    def trial_values(self, stored: dict[str, Any]) -> dict[str, Any]:
        """Config values of the parameters Optuna sampled (categorical JSON text turned back)."""
        by_name = {p.name: p for p in self.params}
        return {name: by_name[name].value(value) for name, value in stored.items() if name in by_name}

    def trial_args(self, values: dict[str, Any], save_dir: str) -> Args:
        """The resolved x-train options of a trial with sampled ``values`` (ConfigError when invalid)."""
        return resolve_train(self.base, {**values, **self.overrides(values, save_dir)},
                             {p.name: p.source for p in self.params})

    def overrides(self, values: dict[str, Any], save_dir: str) -> dict[str, Any]:
        """What the tuner sets in every trial: its folder, a fresh start, evaluations at assessments."""
        b = self.base_args
        size = values.get("batch_size", b.batch_size) * values.get("update_freq", b.update_freq)
        scale = self.update_size / size  # trial updates per base-config update (tuned batch sizes)
        out: dict[str, Any] = {"save_dir": save_dir, "resume": False, "overwrite": False, "auto_suffix": False,
                               "train_steps": None, "eval_interval_warmup": 0,
                               "eval_interval": max(1, round(self.args.assess_interval * scale))}
        if b.max_update is not None and size != self.update_size:
            out["max_update"] = max(1, round(b.max_update * scale))  # the same number of samples
        return out


def config_dir_of(args: Args, key: str) -> str | None:
    source = args.source(key)
    return os.path.dirname(os.path.abspath(source)) if source and os.path.exists(source) else None


def resolve_train(base: Config, changes: dict[str, Any], change_sources: dict[str, str]) -> Args:
    command = get_command("x-train")
    config = Config({**base.values, **changes}, {**base.sources, **change_sources}, base.file)
    config = command.prepare(config)
    return resolve(config.values, COMMON_OPTIONS + command.options(), command.group, sources=config.sources,
                   origin=config.file)


def load_base(args: Args) -> Config:
    path = find_config_file(args.base_config, config_dir_of(args, "base_config"))
    configs = load_config(path)
    if len(configs) != 1:
        raise ConfigError(f"{args.source('base_config')}: key 'base_config': {path} describes {len(configs)} runs "
                          "(a loop): the base config must be one run; the space says what varies")
    return configs[0]


def check_space(params: list[Param], base: Config, save_dir: str) -> list[str]:
    """Every value at the ends of each range (and every choice) checked against x-train's options."""
    problems: list[str] = []
    for param in params:
        for value in param.corners():
            try:
                resolve_train(base, {param.name: value, "save_dir": save_dir, "resume": False},
                              {param.name: param.source})
            except ConfigError as e:
                for line in e.problems:
                    line = line.replace(f"{param.source}: key '{param.name}'",
                                        f"{param.source}: key '{param.name}' (value {value!r})")
                    if line not in problems:
                        problems.append(line)
    return problems


def total_updates(base_args: Args, update_size: int) -> int:
    limits = []
    if base_args.max_update:
        limits.append(base_args.max_update)
    if base_args.max_epoch:
        sizes = base_args.get("data_size") or {}
        splits, _ = match_subsets(base_args.train_subset, list(sizes))
        if splits:
            per_epoch = math.ceil(sum(sizes[s] for s in splits) / update_size)
            limits.append(base_args.max_epoch * per_epoch)
    return min(limits) if limits else 0


def build_plan(args: Args) -> TunePlan:
    """Read and check space, base config and their combination; nothing is written."""
    space_path = find_config_file(args.space_config, config_dir_of(args, "space_config"))
    params = load_space(space_path)
    base = load_base(args)
    placeholder = trial_dir(args.save_dir, 0)
    try:
        base_args = resolve_train(base, {"save_dir": placeholder, "resume": False}, {})
    except ConfigError as e:
        raise ConfigError([f"base_config: {p}" for p in e.problems]) from None
    problems = check_space(params, base, placeholder)
    train_problems, _ = get_command("x-train").preflight(base_args)
    problems += [f"base_config: {p}" for p in train_problems if "key 'save_dir'" not in p]
    if base_args.valid_subset is None:
        problems.append(f"{base.sources.get('valid_subset', base.file)}: key 'valid_subset' is null: trials are "
                        "compared on their evaluations, set valid_subset (e.g. dev)")
    update_size = base_args.batch_size * base_args.update_freq
    updates = total_updates(base_args, update_size)
    if updates and args.assess_start_step >= updates:
        problems.append(f"{args.source('assess_start_step')}: key 'assess_start_step': {args.assess_start_step} is "
                        f"not below the {updates} updates of a whole trial: nothing would be assessed; lower it")
    if problems:
        raise ConfigError(problems)
    return TunePlan(args, params, base, base_args, update_size, updates or args.assess_start_step)


def write_train_config(args: Args, path: str, about: str) -> None:
    """The options of ``args`` that differ from their defaults, as an hjson x-train runs as is; a credential
    in a value is written masked (the trials get it from x-tune's environment: run_study).

    Paths stay as the base config wrote them: a relative data_dir stays relative. XDPX reads a relative
    option path from the working directory, wherever the config file lives (docs/config.md), so this file
    names the same files as the base config when run from the folder x-tune ran in, and diff_params
    between the two shows only what the trial changed. The first lines say so (``about``: what the file is)."""
    values = {name: redact(value) for name, value in args.non_defaults().items()}
    header = (f"# {about}\n# x-train it from {redact(os.getcwd())}, where x-tune ran: relative paths are relative to "
              "the working directory, as in the base config\n")
    with io.open(path, "w") as f:
        f.write(header + hjson.dumps(values, indent=2, ensure_ascii=False) + "\n")
