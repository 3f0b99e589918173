"""Commands that take config files (x-prepro, x-train, ...) and x-script tools, in their registries.

A command declares its root options; the dispatcher (:mod:`xdpx.cli`) loads each config, resolves
every run against those options before any work, then calls :meth:`Command.run` for each run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xdpx.config.loader import Config
from xdpx.config.options import Args, Option
from xdpx.registry import Registry

# Command modules keep their top-level imports light (no torch): `x-train --dry` stays fast.
commands = Registry(
    "command",
    modules=(
        "xdpx.data.prepro",
        "xdpx.train.command",
        "xdpx.inference.evaluate",
        "xdpx.inference.predict",
        "xdpx.viz.command",
        "xdpx.tune.command",
        "xdpx.scripts.export_torchscript",
        "xdpx.scripts.export_onnx",
        "xdpx.scripts.export_hf",
        "xdpx.scripts.export_tf",
        "xdpx.scripts.export_pt",
    ),
)
scripts = Registry(
    "script",
    modules=(
        "xdpx.scripts.options",
        "xdpx.scripts.options_docs",
        "xdpx.scripts.show_data",
        "xdpx.scripts.aggregate_results",
        "xdpx.scripts.diff_params",
        "xdpx.scripts.clean_checkpoints",
        "xdpx.scripts.profile",
        "xdpx.scripts.export_torchscript",
        "xdpx.scripts.export_onnx",
        "xdpx.scripts.export_hf",
        "xdpx.scripts.export_tf",
        "xdpx.scripts.export_pt",
    ),
)

COMMON_OPTIONS = [
    Option("user_dir", str, default=None,
           doc="a folder (Python package) of your own components to import before the config is checked"),
]


class Command:
    """A config-driven command. Subclasses set ``name``, ``group`` and implement ``options``/``run``."""

    name: str = ""
    group: str = ""
    # The key naming a run's output folder: runs of one loop must not share it.
    output_key: str | None = None

    def options(self) -> list[Any]:
        raise NotImplementedError

    def prepare(self, config: Config) -> Config:
        """Adjust a loaded config before it is checked (e.g. x-eval adds the run's own options)."""
        return config

    def run(self, args: Args, dry: bool = False) -> None:
        raise NotImplementedError


def get_command(name: str) -> Command:
    return commands.get(name)()


def script(name: str) -> Callable[[Callable[[list[str]], int | None]], Callable[[list[str]], int | None]]:
    """Register an x-script tool: a function taking its argv and returning an exit code (or None)."""
    return scripts.register(name)
