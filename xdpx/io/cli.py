"""``x-io COMMAND ARGS``: the functions of :mod:`xdpx.io` from the shell.

Arguments are converted to the types the function declares (``true``/``false`` for bools, ints, floats;
paths stay strings). Lists print one item per line, bools as true/false. Errors print one line,
``x-io: error: ...``, and exit with 1 (2 for usage errors).
"""

from __future__ import annotations

import inspect
import re
import sys
import typing
from collections.abc import Callable
from typing import Any

import xdpx.io as xio
from xdpx.errors import UserError

_COMMANDS = (
    "exists", "isdir", "isfile", "listdir", "glob", "size", "last_modified", "md5", "is_writable",
    "makedirs", "remove", "rmtree", "copy", "move", "copytree", "cat",
)  # fmt: skip

# Shell-style short names.
_ALIASES = {"ls": "listdir", "cp": "copy", "mv": "move", "rm": "remove", "mkdir": "makedirs", "cptree": "copytree"}


def cat(path: str) -> None:
    """Print a text file (utf-8) to stdout."""
    with xio.open(path, "r", errors="replace") as f:
        while chunk := f.read(1 << 16):
            sys.stdout.write(chunk)
    sys.stdout.flush()


def _function(name: str) -> Callable[..., Any]:
    return cat if name == "cat" else getattr(xio, name)


class UsageError(Exception):
    pass


def _convert(value: str, hint: Any, name: str) -> Any:
    # Optional[X] / X | None: convert to X
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if args and typing.get_origin(hint) is not None and len(args) == 1:
        hint = args[0]
    if hint is bool:
        low = value.lower()
        if low in ("true", "1", "yes"):
            return True
        if low in ("false", "0", "no"):
            return False
        raise UsageError(f"argument {name} must be true or false, got {value!r}")
    if hint in (int, float):
        try:
            return hint(value)
        except ValueError:
            raise UsageError(f"argument {name} must be {hint.__name__}, got {value!r}") from None
    return value


def _call(name: str, argv: list[str]) -> Any:
    fn = _function(name)
    sig = inspect.signature(fn)
    hints = typing.get_type_hints(fn)
    params = list(sig.parameters.values())
    required = [p for p in params if p.default is inspect.Parameter.empty]
    if not len(required) <= len(argv) <= len(params):
        raise UsageError(f"{name} takes {_usage_args(fn)} (got {len(argv)} argument(s))")
    for p, v in zip(params, argv):  # x-io takes no flags: a word starting with '-' is a mistyped flag, not a path
        if v.startswith("-") and v != "-" and hints.get(p.name, str) not in (bool, int, float):
            raise UsageError(f"unknown flag {v!r}: x-io {name} takes {_usage_args(fn)} and no flags (a path that "
                             f"starts with '-' is written ./{v})")
    args = [_convert(v, hints.get(p.name, str), p.name) for p, v in zip(params, argv)]
    return fn(*args)


def _usage_args(fn: Callable[..., Any]) -> str:
    parts = []
    for p in inspect.signature(fn).parameters.values():
        parts.append(p.name.upper() if p.default is inspect.Parameter.empty else f"[{p.name.upper()}]")
    return " ".join(parts)


def _print(result: Any) -> None:
    if result is None:
        return
    if isinstance(result, bool):
        print("true" if result else "false")
    elif isinstance(result, (list, tuple)):
        for item in result:
            print(item)
    else:
        print(result)


def _plain(doc: str) -> str:
    """Docstring markup (``code``, :func:`name`) as plain text for the terminal."""
    return re.sub(r":\w+:`([^`]+)`", r"\1", doc).replace("``", "")


def usage() -> str:
    lines = ["usage: x-io COMMAND ARGS...", "", "File operations on local and remote (s3://, oss://, ...) paths.", ""]
    width = max(len(n) for n in _COMMANDS)
    for name in _COMMANDS:
        fn = _function(name)
        doc = _plain((inspect.getdoc(fn) or "").split("\n")[0])
        lines.append(f"  {name:<{width}}  {_usage_args(fn):<22} {doc}")
    aliases = ", ".join(f"{a}={n}" for a, n in _ALIASES.items())
    lines += [
        "",
        f"Aliases: {aliases}.",
        "Bool args: true/false. Run 'x-io COMMAND --help' for details. Env: XDPX_IO_CONFIG, XDPX_QUIET.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run one x-io command; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0 if argv else 2
    name, args = _ALIASES.get(argv[0], argv[0]), argv[1:]
    if name not in _COMMANDS:
        print(f"x-io: error: unknown command {name!r}; run 'x-io --help' for the list", file=sys.stderr)
        return 2
    if any(a in ("-h", "--help") for a in args):
        fn = _function(name)
        print(f"usage: x-io {name} {_usage_args(fn)}\n\n{_plain(inspect.getdoc(fn) or '')}")
        return 0
    try:
        _print(_call(name, args))
    except UsageError as e:
        print(f"x-io: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # one clean line for the shell, secrets masked; no traceback
        print(f"x-io: error: {_describe(e)}", file=sys.stderr)
        return 1
    return 0


def _describe(e: BaseException) -> str:
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        text = f"{e.strerror}: {e.filename}"
    elif isinstance(e, UserError):  # its message is written for the user already (e.g. a missing backend)
        text = str(e)
    else:
        text = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    return " ".join(str(xio.redact(text)).split())  # one line


if __name__ == "__main__":
    sys.exit(main())
