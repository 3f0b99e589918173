"""Entry points of every ``x-*`` command and the dispatcher they share.

``x-prepro a.hjson x-train b.hjson --dry``: each command with its config files, in order; ``--dry``
anywhere resolves and checks everything and prints it without doing work. A config that describes
several runs (loops) is checked whole before the first run starts. The chain stops at the first
failure with that failure's exit code.
"""

from __future__ import annotations

import sys
import traceback
from typing import Any

from xdpx.config.errors import ConfigError

EXIT_CONFIG = 2  # a config or usage problem, found before any work
EXIT_FAILED = 1  # the work itself failed
STDIN = "-"  # a config file argument that means: read the config from standard input
HELP_FLAGS = ("-h", "--help")


class UserError(Exception):
    """A problem the user can fix (bad data, missing file...): printed without a traceback."""


def split_chain(argv: list[str]) -> tuple[list[tuple[str, list[str]]], bool]:
    """``['x-prepro', 'a', 'x-train', 'b', '--dry']`` -> ([('x-prepro', ['a']), ('x-train', ['b'])], True)."""
    from xdpx.command import commands

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
    from xdpx.command import COMMON_OPTIONS, get_command
    from xdpx.config.loader import load_config
    from xdpx.config.options import resolve
    from xdpx.registry import load_user_dir

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


def help_requested(argv: list[str]) -> str | None:
    """The command whose usage ``-h`` / ``--help`` asks for: the command before the flag (else the first)."""
    from xdpx.command import commands

    for index, token in enumerate(argv):
        if token in HELP_FLAGS:
            before = [t for t in argv[:index] if t in commands]
            after = [t for t in argv[index:] if t in commands]
            return (before or after or [None])[-1 if before else 0]
    return None


def run_command(command: Any, args: Any, dry: bool) -> None:
    """One run of a command. Under torchrun (several processes), a command written for one process
    (``every_rank = False``, e.g. x-prepro) runs on rank 0 while the others wait for it."""
    import os

    if dry or command.every_rank or int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        command.run(args, dry=dry)
        return
    from xdpx.train.distributed import on_main_process

    on_main_process(lambda: command.run(args, dry=dry))


def run_chain(argv: list[str]) -> int:
    from xdpx.command import get_command, usage
    from xdpx.config.writers import format_dry

    name = help_requested(argv)
    if name is not None:
        print(usage(name), end="")
        return 0
    try:
        steps, dry = split_chain(argv)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_CONFIG
    for name, files in steps:
        for path in files:
            try:
                runs = resolve_runs(name, path)
            except ConfigError as e:
                print(f"{name}: error: {e}", file=sys.stderr)
                return EXIT_CONFIG
            command = get_command(name)
            for index, args in enumerate(runs):
                if dry:
                    print(f"# {name} {path}: run {index + 1} of {len(runs)}")
                    print(format_dry(args))
                try:
                    run_command(command, args, dry)
                except ConfigError as e:
                    print(f"{name}: error: {e}", file=sys.stderr)
                    return EXIT_CONFIG
                except UserError as e:
                    print(f"{name}: error: {e}", file=sys.stderr)
                    return EXIT_FAILED
                except OSError as e:
                    from xdpx.io.retry import StoreUnavailableError

                    if not isinstance(e, StoreUnavailableError):
                        traceback.print_exc()
                        return EXIT_FAILED
                    print(f"{name}: error: {e}", file=sys.stderr)  # one line: the store is away
                    return EXIT_FAILED
                except KeyboardInterrupt:
                    print(f"{name}: interrupted", file=sys.stderr)
                    return 130
                except Exception:  # an unexpected failure: show where it happened
                    traceback.print_exc()
                    return EXIT_FAILED
            if dry:
                print(f"# {name} {path}: {len(runs)} run{'s' if len(runs) != 1 else ''}, all valid (--dry: nothing done)")
    return 0


def _chain_entry(name: str) -> int:
    return run_chain([name] + sys.argv[1:])


def x_prepro() -> None:
    sys.exit(_chain_entry("x-prepro"))


def x_train() -> None:
    sys.exit(_chain_entry("x-train"))


def x_eval() -> None:
    sys.exit(_chain_entry("x-eval"))


def x_pred() -> None:
    sys.exit(_chain_entry("x-pred"))


def x_serve() -> None:
    from xdpx.inference.serve import main

    sys.exit(main(sys.argv[1:]))


def x_viz() -> None:
    sys.exit(_chain_entry("x-viz"))


def x_tune() -> None:
    sys.exit(_chain_entry("x-tune"))


def x_io() -> None:
    from xdpx.io.cli import main

    sys.exit(main(sys.argv[1:]))


def x_script(argv: list[str] | None = None) -> int:
    """``x-script NAME ARGS``: run one tool; without a name, list them."""
    from xdpx.command import scripts

    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: x-script NAME [ARGS...]\n\ntools:")
        for name, fn in scripts.items():
            print(f"  {name:22s} {(fn.__doc__ or '').strip().splitlines()[0] if fn.__doc__ else ''}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in scripts:
        print(f"x-script: error: {scripts.unknown_message(name)}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        code = scripts.get(name)(rest)
    except (ConfigError, UserError) as e:
        print(f"x-script {name}: error: {e}", file=sys.stderr)
        return EXIT_CONFIG if isinstance(e, ConfigError) else EXIT_FAILED
    return int(code or 0)


def x_script_entry() -> None:
    sys.exit(x_script())


def x_submit() -> None:
    """``x-submit [flags] x-train config.hjson ...``: check like --dry, then submit to Slurm (docs/submit.md)."""
    from xdpx.submit.main import main

    sys.exit(main(sys.argv[1:]))
