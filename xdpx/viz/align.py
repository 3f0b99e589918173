"""Putting several runs on one x axis: by samples seen (the default) or by training time.

The x axis counts the updates of the main run. A reference run is placed where it had seen as many
training samples: with half the main run's effective batch, its update 20000 is drawn at 10000. So the
curves compare how fast models learn from data, whatever their batch size, accumulation or number of
processes (the seed FAQ's reason for drawing our own plots).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from xdpx.viz.runs import Run

XFunction = Callable[[dict[str, Any]], float | None]


def _samples_to_steps(run: Run) -> Callable[[np.ndarray], np.ndarray]:
    """Samples seen -> updates of ``run`` (interpolated between log rows, extrapolated at its batch)."""
    size = run.update_size or 1
    points = sorted({(0, 0)} | {(int(r["samples"]), int(r["step"])) for r in run.train + run.valid
                                if r.get("samples") is not None and r.get("step") is not None})
    samples = np.array([p[0] for p in points], dtype=float)
    steps = np.array([p[1] for p in points], dtype=float)

    def convert(values: np.ndarray) -> np.ndarray:
        values = np.asarray(values, dtype=float)
        out = np.interp(values, samples, steps)
        beyond = values > samples[-1]
        out[beyond] = steps[-1] + (values[beyond] - samples[-1]) / size
        return out

    return convert


def _samples_to_minutes(run: Run) -> Callable[[np.ndarray], np.ndarray]:
    """Samples seen -> minutes of training (evaluations excluded), from samples_per_s of each row."""
    points = [(0.0, 0.0)]
    for row in run.train:
        samples, speed = row.get("samples"), row.get("samples_per_s")
        if samples is None or not speed or samples <= points[-1][0]:
            continue
        points.append((float(samples), points[-1][1] + (samples - points[-1][0]) / speed / 60.0))
    samples = np.array([p[0] for p in points])
    minutes = np.array([p[1] for p in points])
    rate = (minutes[-1] / samples[-1]) if samples[-1] > 0 else 0.0

    def convert(values: np.ndarray) -> np.ndarray:
        values = np.asarray(values, dtype=float)
        out = np.interp(values, samples, minutes)
        beyond = values > samples[-1]
        out[beyond] = minutes[-1] + (values[beyond] - samples[-1]) * rate
        return out

    return convert


class Axis:
    """The shared x axis of one figure set: ``x(run, rows)`` gives the positions of a run's rows."""

    def __init__(self, main: Run, walltime: bool = False) -> None:
        self.main, self.walltime = main, walltime
        self.update_size = main.update_size or 1
        self._main_steps = _samples_to_steps(main)
        self._minutes = {id(main): _samples_to_minutes(main)}

    @property
    def label(self) -> str:
        if self.walltime:
            return "training time (minutes, evaluations excluded)"
        return f"updates of {self.main.label} ({self.update_size} samples each)"

    def x_of_samples(self, run: Run, samples: np.ndarray) -> np.ndarray:
        """Positions of sample counts of ``run`` on this axis."""
        if self.walltime:
            if id(run) not in self._minutes:
                self._minutes[id(run)] = _samples_to_minutes(run)
            return self._minutes[id(run)](samples)
        return self._main_steps(samples)

    def x(self, run: Run, rows: list[dict[str, Any]]) -> np.ndarray:
        if run is self.main and not self.walltime:  # the main run at its own steps, exactly
            return np.array([float(r["step"]) for r in rows])
        return self.x_of_samples(run, np.array([float(r["samples"]) for r in rows]))

    def samples_of_x(self, x: np.ndarray) -> np.ndarray:
        """Inverse for the secondary 'samples seen' axis (updates axis only)."""
        return np.asarray(x, dtype=float) * self.update_size
