"""Entry points of every ``x-*`` command: the console scripts of pyproject.toml.

The config-driven commands (x-prepro, x-train, x-eval, x-pred, x-viz, x-tune) run through the dispatcher
of :mod:`xdpx.chain`; x-serve, x-io, x-submit and x-script parse their own arguments. This is the top
floor of the package: nothing in xdpx imports it (docs/architecture.md; tests/test_layers.py checks it).
The names tests and user scripts use from here (``run_chain``, ``UserError``, ...) are re-exported.
"""

from __future__ import annotations

import sys

from xdpx.chain import HELP_FLAGS, STDIN, check_tool_words, resolve_runs, run_chain, split_chain, tool_usage
from xdpx.command import scripts
from xdpx.config.errors import ConfigError
from xdpx.errors import EXIT_CONFIG, EXIT_FAILED, UserError
from xdpx.io.credentials import redact

__all__ = ["EXIT_CONFIG", "EXIT_FAILED", "HELP_FLAGS", "STDIN", "ConfigError", "UserError", "resolve_runs",
           "run_chain", "split_chain", "x_eval", "x_io", "x_pred", "x_prepro", "x_script", "x_serve",
           "x_submit", "x_train", "x_tune", "x_viz"]


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
    from xdpx.serve.command import main  # lazy: each console script loads only its own command

    sys.exit(main(sys.argv[1:]))


def x_viz() -> None:
    sys.exit(_chain_entry("x-viz"))


def x_tune() -> None:
    sys.exit(_chain_entry("x-tune"))


def x_io() -> None:
    from xdpx.io.cli import main  # lazy: each console script loads only its own command

    sys.exit(main(sys.argv[1:]))


def x_script(argv: list[str] | None = None) -> int:
    """``x-script NAME ARGS``: run one tool; without a name, list them."""
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
    if any(a in HELP_FLAGS for a in rest):  # answered here, so no tool ever takes --help for a path
        print(tool_usage(name), end="")
        return 0
    try:
        check_tool_words(name, rest)  # nor a word starting with '-' (a mistyped flag) for a path
        code = scripts.get(name)(rest)
    except (ConfigError, UserError) as e:
        print(f"x-script {name}: error: {redact(str(e))}", file=sys.stderr)
        return EXIT_CONFIG if isinstance(e, ConfigError) else EXIT_FAILED
    return int(code or 0)


def x_script_entry() -> None:
    sys.exit(x_script())


def x_submit() -> None:
    """``x-submit [flags] x-train config.hjson ...``: check like --dry, then submit to Slurm (docs/submit.md)."""
    from xdpx.submit.main import main  # lazy: each console script loads only its own command

    sys.exit(main(sys.argv[1:]))
