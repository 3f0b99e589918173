"""The sampler of a study: trial n drawn with seed + n, and never a configuration the study already has.

Workers on one study each build their own sampler, so a seed that depends on what a worker saw (the
number of trials when it asked) gives two workers that ask at once the same seed and the same values.
The trial's number does not: the storage gives each new trial its own (``study.ask``), so seeding the
draw of trial n with ``seed + n`` gives every trial its own random stream, and trial n of one worker
draws what trial n of a single process would.

A random draw can still repeat a configuration when the space is finite (categorical, int, float with a
step). With ``space`` given, the sampler draws the whole configuration at once (Optuna's "relative"
sampling) and draws again while it equals a configuration in ``taken``; the caller (runner.py) reserves
the trial under the storage's lock, so ``taken`` is every configuration of the study at that moment.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Iterable
from typing import Any

from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.samplers import BaseSampler, RandomSampler, TPESampler

TUNER_DRAWS = 10  # draws from the study's own sampler before falling back to uniform ones (TPE can insist)
RANDOM_DRAWS = 1000  # uniform draws in a space too large to list; a repeat there is vanishingly rare
LISTED = 100_000  # a finite space up to this size is listed to pick among its untried configurations


class SpaceExhausted(Exception):
    """Every configuration of a finite space is in the study."""


def value_key(distribution: BaseDistribution, value: Any) -> Any:
    """What identifies a value of ``distribution``: categorical choices by index, stepped floats by step."""
    if isinstance(distribution, CategoricalDistribution):
        return int(distribution.to_internal_repr(value))
    if isinstance(distribution, IntDistribution):
        return int(value)
    if isinstance(distribution, FloatDistribution) and distribution.step is not None:
        return round((float(value) - distribution.low) / distribution.step)
    return float(value)


def config_key(params: dict[str, Any], space: dict[str, BaseDistribution]) -> tuple[Any, ...] | None:
    """The configuration ``params`` as a comparable key; None when it lacks a parameter of the space (or
    holds a choice the space does not have: a study made before x-tune recorded its space)."""
    if any(name not in params for name in space):
        return None
    try:
        return tuple(value_key(space[name], params[name]) for name in sorted(space))
    except ValueError:
        return None


def taken_configs(trials: Iterable[Any], space: dict[str, BaseDistribution],
                  skip: Callable[[Any], bool] = lambda t: False) -> set[tuple[Any, ...]]:
    """The configurations of ``trials`` (those with every parameter of the space, not ``skip``-ped)."""
    keys = (config_key(t.params, space) for t in trials if not skip(t))
    return {key for key in keys if key is not None}


def _values(distribution: BaseDistribution) -> list[Any] | None:
    """Every value of a finite distribution; None for a continuous one."""
    if isinstance(distribution, CategoricalDistribution):
        return list(distribution.choices)
    if isinstance(distribution, IntDistribution):
        return list(range(distribution.low, distribution.high + 1, distribution.step))
    if isinstance(distribution, FloatDistribution) and distribution.step is not None:
        count = math.floor((distribution.high - distribution.low) / distribution.step + 1e-8) + 1
        return [distribution.low + i * distribution.step for i in range(count)]
    return None


def space_size(space: dict[str, BaseDistribution]) -> int | None:
    """How many configurations ``space`` holds; None when a parameter is continuous."""
    size = 1
    for distribution in space.values():
        if isinstance(distribution, CategoricalDistribution):
            size *= len(distribution.choices)
        elif isinstance(distribution, IntDistribution):
            size *= (distribution.high - distribution.low) // distribution.step + 1
        elif isinstance(distribution, FloatDistribution) and distribution.step is not None:
            size *= math.floor((distribution.high - distribution.low) / distribution.step + 1e-8) + 1
        else:
            return None
    return size


def _draw(sampler: BaseSampler, study: Any, trial: Any, space: dict[str, BaseDistribution]) -> dict[str, Any]:
    """A whole configuration as Optuna's ask would draw it with ``sampler`` alone: its relative sampling
    (multivariate TPE) for what that covers, then independent draws in the order of ``space``."""
    inner = {n: d for n, d in sampler.infer_relative_search_space(study, trial).items() if n in space}
    params = {n: v for n, v in sampler.sample_relative(study, trial, inner).items() if n in space}
    for name, distribution in space.items():
        if name not in params:
            params[name] = sampler.sample_independent(study, trial, name, distribution)
    return params


def tuner_sampler(tuner: str, seed: int) -> BaseSampler:
    """Optuna's sampler for ``tuner`` with ``seed``."""
    return TPESampler(seed=seed) if tuner == "tpe" else RandomSampler(seed=seed)


class TrialSeededSampler(BaseSampler):
    """Optuna's TPE or random sampler, seeded with ``seed + trial.number`` for each trial; with ``space``,
    a configuration not in ``taken`` (raises :class:`SpaceExhausted` when a finite space has none left)."""

    def __init__(self, tuner: str, seed: int, space: dict[str, BaseDistribution] | None = None,
                 taken: set[tuple[Any, ...]] | None = None) -> None:
        self.tuner, self.seed = tuner, seed
        self.space = dict(space or {})
        self.taken = taken or set()
        self._number: int | None = None
        self._sampler: BaseSampler | None = None

    def _for(self, number: int) -> BaseSampler:
        # one sampler per trial: the sampler of trial n starts from seed + n whoever asks for it
        if self._number != number or self._sampler is None:
            self._number, self._sampler = number, tuner_sampler(self.tuner, self.seed + number)
        return self._sampler

    def infer_relative_search_space(self, study: Any, trial: Any) -> dict[str, BaseDistribution]:
        if trial.params or trial.system_attrs.get("fixed_params"):  # a retry runs its original's values
            return {}
        return dict(self.space)

    def sample_relative(self, study: Any, trial: Any, search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        if not search_space:
            return {}
        sampler = self._for(trial.number)
        draw = lambda s: _draw(s, study, trial, search_space)  # noqa: E731
        for _ in range(TUNER_DRAWS):  # the first draw is what the sampler alone would give this trial
            params = draw(sampler)
            if config_key(params, search_space) not in self.taken:
                return params
        rng = random.Random(self.seed + trial.number)
        size = space_size(search_space)
        if size is not None and size <= LISTED:
            names = sorted(search_space)
            free = [combo for combo in itertools.product(*(_values(search_space[n]) for n in names))
                    if config_key(dict(zip(names, combo)), search_space) not in self.taken]
            if not free:
                raise SpaceExhausted(f"all {size} configurations of the search space are in the study")
            return dict(zip(names, rng.choice(free)))
        uniform = RandomSampler(seed=rng.randrange(2**31))
        for _ in range(RANDOM_DRAWS):
            params = draw(uniform)
            if config_key(params, search_space) not in self.taken:
                return params
        raise SpaceExhausted("no untried configuration found in the search space")

    def sample_independent(self, study: Any, trial: Any, param_name: str, param_distribution: BaseDistribution) -> Any:
        return self._for(trial.number).sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: Any, trial: Any) -> None:
        self._for(trial.number).before_trial(study, trial)

    def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
        self._for(trial.number).after_trial(study, trial, state, values)
