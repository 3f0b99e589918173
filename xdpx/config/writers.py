"""What resolved arguments turn into: args.py, starter_config.hjson and the ``--dry`` listing.

args.py is a Python literal (read back with :func:`read_args`, i.e. ast.literal_eval, never eval):
a dict of groups, each a dict of options; ``# *`` marks a value that differs from its default.

Every value goes through :func:`xdpx.io.redact` first: a credential in an option (the password of a URL,
a secret query parameter) is written masked (``***``) in all three. A run read back from args.py gets the
masked value; where it connects with it, :func:`xdpx.io.credentials.unmask` takes the password from the
environment instead (docs/io.md, "Credentials").
"""

from __future__ import annotations

import ast
import math
from typing import Any

import hjson

from xdpx import io
from xdpx.config.options import Args
from xdpx.io.credentials import redact

ARGS_FILE = "args.py"
STARTER_FILE = "starter_config.hjson"


def _literal(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(str(value))  # inf/nan are no Python literals; keep them readable
    return repr(value)


def format_args_py(args: Args) -> str:
    lines = ["{"]
    for group, options in args.grouped().items():
        lines.append(f"    {group!r}: {{")
        for name, value in options.items():
            mark = "  # *" if not args.is_default(name) else ""
            lines.append(f"        {name!r}: {_literal(redact(value))},{mark}")
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines) + "\n"


def read_args(path: str) -> dict[str, Any]:
    """The options of an args.py, flattened over groups (safe: ast.literal_eval)."""
    with io.open(path) as f:
        tree = ast.literal_eval(f.read())
    return {name: value for group in tree.values() for name, value in group.items()}


def format_starter_config(args: Args) -> str:
    """Only the options that differ from their defaults: a config ready to edit and reuse."""
    values = {name: redact(value) for name, value in args.non_defaults().items()}
    return hjson.dumps(values, indent=2, ensure_ascii=False) + "\n"


def masked_options(args: Args) -> list[str]:
    """The options whose value holds a credential: args.py and starter_config.hjson show them masked."""
    return [name for options in args.grouped().values() for name, value in options.items()
            if redact(value) != value]


def masked_notice(names: list[str], files: str) -> str:
    """One line for the user whose options hold a credential: where a reader of ``files`` gets it."""
    return (f"note: {', '.join(names)} hold(s) a credential, kept masked (***) in {files}; a run read back "
            "from them takes the password from the environment or the io config instead: put it there "
            "(PostgreSQL: PGPASSWORD or ~/.pgpass; an MLflow server: MLFLOW_TRACKING_USERNAME/PASSWORD; object "
            "stores: the file named by XDPX_IO_CONFIG; docs/io.md, Credentials)")


def write_run_files(args: Args, directory: str, header: str = "") -> None:
    """args.py (after ``header``: comment lines such as the code version) and starter_config.hjson."""
    with io.open(io.join(directory, ARGS_FILE), "w") as f:
        f.write(redact(header) + format_args_py(args))
    with io.open(io.join(directory, STARTER_FILE), "w") as f:
        f.write(format_starter_config(args))


def format_dry(args: Args) -> str:
    """The resolved options grouped by component; ``*`` marks a non-default value."""
    lines = []
    for group, options in args.grouped().items():
        lines.append(f"[{group}]")
        width = max(len(n) for n in options)
        for name, value in options.items():
            mark = "*" if not args.is_default(name) else " "
            lines.append(f"  {mark} {name.ljust(width)}  {redact(value)!r}")
    return "\n".join(lines)
