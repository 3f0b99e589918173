"""Commands that take config files (x-prepro, x-train, ...) and x-script tools, in their registries.

A command declares its root options; the dispatcher (:mod:`xdpx.chain`) loads each config, resolves
every run against those options before any work, then calls :meth:`Command.run` for each run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from xdpx import io
from xdpx.config.loader import Config
from xdpx.config.options import Args, Option
from xdpx.io.ownership import Output, check_outputs
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
        "xdpx.scripts.average_checkpoints",
        "xdpx.scripts.merge_lora",
        "xdpx.scripts.quantize",
        "xdpx.scripts.profile",
        "xdpx.scripts.confusion_matrix",
        "xdpx.scripts.calibrate",
        "xdpx.scripts.errors",
        "xdpx.scripts.bce_threshold",
        "xdpx.scripts.best_threshold",
        "xdpx.scripts.build_index",
        "xdpx.scripts.search",
        "xdpx.scripts.eval_corpus",
        "xdpx.scripts.mine_negatives",
        "xdpx.scripts.rerank_pairs",
        "xdpx.scripts.diff_meta",
        "xdpx.scripts.diff_data",
        "xdpx.scripts.prune_heads",
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
    # One command line shown by `--help`; default: `NAME config.hjson --dry`.
    example: str = ""
    # Under torchrun: True when every process takes part (x-train, x-eval, x-pred); otherwise the command
    # runs on rank 0 while the other processes wait (xdpx.chain.run_command).
    every_rank: bool = False

    def options(self) -> list[Any]:
        raise NotImplementedError

    def prepare(self, config: Config) -> Config:
        """Adjust a loaded config before it is checked (e.g. x-eval adds the run's own options)."""
        return config

    def preflight(self, args: Args) -> tuple[list[str], list[str]]:
        """(problems, notes) that the checks before any work find in a resolved config; nothing is written.
        A workflow that starts this command's runs itself (x-tune's trials of x-train) checks them here,
        through the command, not through the command's modules. Default: none."""
        return [], []

    def run(self, args: Args, dry: bool = False) -> None:
        raise NotImplementedError

    def running(self, dry: bool) -> contextlib.AbstractContextManager[Any]:
        """What holds from the start of one config file's step, before the config is read, to its end
        (xdpx.chain.run_chain): nothing by default; x-train notes preemption signals from there on."""
        return contextlib.nullcontext()

    def outputs(self, args: Args) -> list[Output]:
        """What a run writes, each checked before any work (xdpx.io.ownership). Default: every option declared
        with ``path="output"``; a folder the command fills when its name ends in ``_dir`` (every folder
        option of XDPX is named so), else a file. Commands whose options hold several paths override it."""
        found = []
        for name, value in args.items():
            option = args.option(name)
            if option is not None and option.path == "output" and isinstance(value, str) and value:
                found.append(Output(name, value, "folder" if name.endswith("_dir") else "file"))
        return found

    def inputs(self, args: Args) -> list[tuple[str, str]]:
        """(option, path) of what a run reads, which no output may be or hold. Default: every option declared
        with ``path="input"``."""
        return [(name, value) for name, value in args.items()
                if isinstance(value, str) and value and getattr(args.option(name), "path", None) == "input"]

    def output_problems(self, args: Args) -> list[str]:
        """Why the outputs of this run must not be written (one line each, the file and key named); empty
        when they may."""
        outputs = self.outputs(args)
        # an empty path or a symbolic link to nothing on the way: no ownership question, nothing can be written
        unwritable = [(out, io.output_path_problem(out.path)) for out in outputs]
        problems = [f"{args.source(out.key)}: key '{out.key}': {problem}" for out, problem in unwritable if problem]
        return problems + check_outputs(self.name, [out for out, problem in unwritable if not problem],
                                        self.inputs(args), args.source)


def get_command(name: str) -> Command:
    return commands.get(name)()


def usage(name: str) -> str:
    """What ``NAME --help`` prints, for any registered command: what it does (its docstring), its
    arguments and flags, where its options are listed, one example."""
    command = get_command(name)
    summary = " ".join((type(command).__doc__ or "").split())
    # a command that is also an x-script tool (the exports) is typed as `x-script NAME`
    typed = f"x-script {name}" if name in scripts else name
    example = command.example or f"{typed} config.hjson --dry"
    where = [(f"x-script options {name}", "the table of the options active by default"),
             (f"x-script options {name} key: value ...", "... once a choice switches others on (e.g. model: re2)"),
             (f"docs/options/{name}.md", "every option, its default and the condition that enables it"),
             ("docs/config.md", "the config syntax: __parent__, loops, ${...}, __def__")]
    width = max(len(left) for left, _ in where) + 3
    options = "\n".join(f"  {left.ljust(width)}{right}" for left, right in where)
    return f"""usage: {typed} CONFIG [CONFIG ...] [--dry] [-h] [x-OTHER CONFIG ...]

{summary}

arguments:
  CONFIG        a config file (hjson or json; a local or remote path) whose keys are {name}'s options;
                several files run one after the other; `-` reads the config from standard input:
                  {typed} - <<EOF
                  {{ ... }}
                  EOF
  x-OTHER ...   further commands of a chain, each with its configs; the chain stops at the first failure

flags:
  --dry         resolve and check every config (all runs of a loop), print the resolved options, do no work
  -h, --help    show this help

options (the keys of CONFIG):
{options}

example:
  {example}
"""


def script(name: str) -> Callable[[Callable[[list[str]], int | None]], Callable[[list[str]], int | None]]:
    """Register an x-script tool: a function taking its argv and returning an exit code (or None).

    The tool's module declares its usage line as ``USAGE = "usage: x-script NAME ARGS [--flag] [--key VALUE]"``:
    ``x-script NAME --help`` prints it under the docstring, and the dispatcher (xdpx.chain.check_tool_words)
    refuses any word starting with ``-`` that the line does not name, before the tool runs."""
    return scripts.register(name)
