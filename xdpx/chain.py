"""The dispatcher every config-driven command runs through: a chain of commands, each with its configs.

``x-prepro a.hjson x-train b.hjson --dry``: each command with its config files, in order; ``--dry``
anywhere resolves and checks everything and prints it without doing work. A config that describes
several runs (loops) is checked whole before the first run starts. The chain stops at the first
failure with that failure's exit code. Commands are found by name in the registry of
:mod:`xdpx.command`, so this module imports none of them; the entry points (:mod:`xdpx.cli`), x-submit
and the x-script tools call it.
"""

from __future__ import annotations

import os
import re
import sys
import traceback
from typing import Any

from xdpx.command import COMMON_OPTIONS, commands, get_command, scripts, usage
from xdpx.config.errors import ConfigError
from xdpx.config.loader import load_config
from xdpx.config.options import resolve
from xdpx.config.writers import format_dry
from xdpx.errors import EXIT_CONFIG, EXIT_FAILED, UserError
from xdpx.io import writer_lock
from xdpx.io.credentials import redact
from xdpx.io.ownership import recording
from xdpx.io.retry import StoreUnavailableError
from xdpx.registry import load_user_dir
from xdpx.utils.cpu_load import choose_wait_policy
from xdpx.utils.distributed_utils import get_world_size, is_master

STDIN = "-"  # a config file argument that means: read the config from standard input
HELP_FLAGS = ("-h", "--help")


def split_chain(argv: list[str]) -> tuple[list[tuple[str, list[str]]], bool]:
    """``['x-prepro', 'a', 'x-train', 'b', '--dry']`` -> ([('x-prepro', ['a']), ('x-train', ['b'])], True)."""
    dry = "--dry" in argv
    argv = [a for a in argv if a != "--dry"]
    if sum(a == STDIN for a in argv) > 1:
        raise ConfigError("`-` (the config on standard input) may be given once in a chain: standard input is read once")
    steps: list[tuple[str, list[str]]] = []
    for token in argv:
        if token in commands:
            steps.append((token, []))
        elif not steps:
            raise ConfigError(f"unknown command {token!r}: {commands.unknown_message(token)}")
        else:
            steps[-1][1].append(token)
    for name, files in steps:
        if not files:
            raise ConfigError(f"{name}: give a config file, e.g. `{name} config.hjson` (add --dry to check it)")
        for f in files:
            if f.startswith("-") and f != STDIN:
                raise ConfigError(f"{name}: unknown flag {f!r} (the flags are --dry and --help; `-` reads the "
                                  "config from standard input)")
    return steps, dry


def resolve_runs(command_name: str, path: str) -> list:
    """Load a config file and check every run it describes; all problems are raised together."""
    command = get_command(command_name)
    configs = load_config(path)
    runs, problems = [], []
    for index, config in enumerate(configs):
        if config.values.get("user_dir"):
            try:
                load_user_dir(config.values["user_dir"])
            except FileNotFoundError as e:
                source = config.sources.get("user_dir", path)
                raise ConfigError(f"{source}: key 'user_dir': {e}: give the folder of your components "
                                  "(a Python package with an __init__.py)") from None
            # recorded absolute (args.py): x-eval, x-pred and x-serve of the run import it from anywhere
            config.values["user_dir"] = os.path.abspath(os.path.expanduser(config.values["user_dir"]))
        try:
            config = command.prepare(config)
            args = resolve(config.values, COMMON_OPTIONS + command.options(), command.group,
                           sources=config.sources, origin=config.file)
        except ConfigError as e:
            label = f"run {index + 1} of {len(configs)}: " if len(configs) > 1 else ""
            problems.extend(label + p for p in e.problems)
            continue
        runs.append(args)
    if command.output_key and len(runs) > 1:
        seen: dict[str, int] = {}
        for index, args in enumerate(runs):
            out = args.get(command.output_key)
            if out in seen:
                problems.append(f"{path}: runs {seen[out] + 1} and {index + 1} share {command.output_key} "
                                f"{out!r}: make it depend on the looped values, e.g. "
                                f"{command.output_key}: outputs/run.lr${{learning_rate}}")
            seen.setdefault(out, index)
    if problems:
        raise ConfigError(problems)
    return runs


def check_outputs(command: Any, runs: list) -> None:
    """Refuse, before the first run starts (also under --dry), every output of every run that would replace
    an input or what XDPX did not write (xdpx.io.ownership); all problems together."""
    problems = [problem for args in runs for problem in command.output_problems(args)]
    if problems:
        raise ConfigError(problems)


def help_requested(argv: list[str]) -> str | None:
    """The command whose usage ``-h`` / ``--help`` asks for: the command before the flag (else the first)."""
    for index, token in enumerate(argv):
        if token in HELP_FLAGS:
            before = [t for t in argv[:index] if t in commands]
            after = [t for t in argv[index:] if t in commands]
            return (before or after or [None])[-1 if before else 0]
    return None


def run_command(command: Any, args: Any, dry: bool) -> None:
    """One run of a command. Under torchrun (several processes), a command written for one process
    (``every_rank = False``, e.g. x-prepro) runs on rank 0 while the others wait for it. The writer locks
    the run takes (its output folder's, xdpx/io/writer_lock.py) are released however it ends."""
    with writer_lock.scope():
        if dry or command.every_rank or get_world_size() <= 1:
            command.run(args, dry=dry)
            return
        # lazy: torch, imported only here: a chain of one process (and every --dry) stays torch-free
        from xdpx.runtime.distributed import on_main_process

        on_main_process(lambda: command.run(args, dry=dry))


def print_traceback() -> None:
    """The traceback of the failure being handled, on stderr, with credentials masked (a message may
    quote an option's URL)."""
    sys.stderr.write(redact("".join(traceback.format_exc())))


def _error(prefix: str, error: BaseException, code: int) -> int:
    """One masked line on stderr for a failure the user can act on; the exit code to return."""
    print(f"{prefix}error: {redact(str(error))}", file=sys.stderr)
    return code


def run_chain(argv: list[str], run_index: int | None = None) -> int:
    """Run the chain; ``run_index``: only that run (0-based, in loop order) of each config with several runs,
    as a task of x-submit's job array runs it (every run is still checked first)."""
    name = help_requested(argv)
    if name is not None:
        print(usage(name), end="")
        return 0
    if any(token in HELP_FLAGS for token in argv):  # `python -m xdpx --help`: no command named yet
        print("usage: python -m xdpx COMMAND CONFIG [CONFIG ...] [--dry] [x-OTHER CONFIG ...]\n\ncommands: "
              f"{', '.join(sorted(commands.names()))} (COMMAND --help for one of them)")
        return 0
    try:
        steps, dry = split_chain(argv)
    except ConfigError as e:
        return _error("", e, EXIT_CONFIG)
    # before torch loads OpenMP: on cores other processes hold, its threads should sleep, not spin
    note = None if dry else choose_wait_policy()
    if note:
        print(f"note: {note}")
    for name, files in steps:
        for path in files:
            command = get_command(name)
            with command.running(dry):  # x-train: a preemption signal from here on stops it cleanly
                try:
                    runs = resolve_runs(name, path)
                    if run_index is not None and len(runs) > 1:
                        if run_index >= len(runs):
                            raise ConfigError(f"{path}: run index {run_index}, but the config describes {len(runs)} runs")
                        runs = [runs[run_index]]
                    check_outputs(command, runs)
                except ConfigError as e:
                    return _error(f"{name}: ", e, EXIT_CONFIG)
                for index, args in enumerate(runs):
                    if dry:
                        print(f"# {name} {redact(path)}: run {index + 1} of {len(runs)}")
                        print(format_dry(args))
                    try:
                        # what the run writes is recorded as XDPX's (once, by the main process)
                        with recording(name, command.outputs(args) if not dry and is_master() else []):
                            run_command(command, args, dry)
                    except ConfigError as e:
                        return _error(f"{name}: ", e, EXIT_CONFIG)
                    except (UserError, StoreUnavailableError) as e:  # one line: the user can act on it
                        return _error(f"{name}: ", e, EXIT_FAILED)
                    except KeyboardInterrupt:
                        print(f"{name}: interrupted", file=sys.stderr)
                        return 130
                    except Exception:  # an unexpected failure: show where it happened
                        print_traceback()
                        return EXIT_FAILED
                if dry:
                    print(f"# {name} {redact(path)}: {len(runs)} run{'s' if len(runs) != 1 else ''}, all valid "
                          "(--dry: nothing done)")
    return 0


def script_main(command_name: str, argv: list[str]) -> int:
    """An x-script tool that is a config-driven command (the exports): ``x-script NAME config.hjson [--dry]``."""
    if not [a for a in argv if a != "--dry"]:
        print(f"usage: x-script {command_name} config.hjson [--dry]   (options: x-script options {command_name})")
        return 2
    return run_chain([command_name] + argv)


# A flag in a usage line: `--out`, `-n`; `-KEYWORD` (capitals) stands for words a tool takes with a dash.
_FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def script_usage(name: str) -> str | None:
    """The usage line of an x-script tool: the ``USAGE`` string of the module that registers it (e.g.
    ``usage: x-script clean_checkpoints ROOT [--dry]``); None for a tool that declares none."""
    usage_line = getattr(sys.modules.get(scripts.get(name).__module__), "USAGE", None)
    return usage_line if isinstance(usage_line, str) else None


def tool_usage(name: str) -> str:
    """What ``x-script NAME --help`` prints: the tool's docstring and usage line; a config-driven tool (an
    export) also gets its command's usage (options, --dry)."""
    doc = " ".join((scripts.get(name).__doc__ or "").split())
    text = f"x-script {name}: {doc}\n" if doc else f"x-script {name}\n"
    usage_line = script_usage(name)
    if usage_line:
        text += f"\n{usage_line}\n"
    return text + ("\n" + usage(name) if name in commands else "")


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def check_tool_words(name: str, argv: list[str]) -> None:
    """Refuse, before an x-script tool runs, every word starting with ``-`` that is not a flag its usage line
    names: a tool never takes ``-n`` or a mistyped ``--out`` for a path or a name (it used to write a folder
    named ``-n``). Also accepted: ``-`` alone, negative numbers (a value such as ``--positive -1``), and any
    word with one dash when the usage line shows ``-KEYWORD`` (aggregate_results' keywords to leave out).
    A config-driven tool (an export) is checked by the chain itself (``split_chain``)."""
    if name in commands:
        return
    usage_line = script_usage(name) or ""
    declared = _FLAG.findall(usage_line)
    flags = {f for f in declared if not f.lstrip("-").isupper()}
    free = any(f.lstrip("-").isupper() for f in declared)
    for word in argv:
        if not word.startswith("-") or word == STDIN or _is_number(word) or (free and not word.startswith("--")):
            continue
        if word not in flags:  # `--steps=3` too: the tools take a flag's value as the next word
            known = ", ".join(sorted(flags)) or "none"
            raise ConfigError(f"unknown flag {word!r} (flags of x-script {name}: {known}; a path that starts "
                              f"with '-' is written ./{word}); {usage_line or f'see x-script {name} --help'}")
