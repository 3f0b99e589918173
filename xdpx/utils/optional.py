"""Optional packages: a feature that needs one imports it through :func:`require`, so a missing package
ends the command with one line naming the extra that installs it (no traceback).

The line is ``FEATURE needs the optional package P: pip install 'xdpx[EXTRA]'``. That install line works
for an installed XDPX, also an editable one (``pip install -e .``): pip finds xdpx installed and adds only
the extra's packages, leaving torch as it is. Imports nothing of xdpx but :mod:`xdpx.errors`.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from xdpx.errors import UserError

# import name -> (the package pip installs, the xdpx extra that brings it; pyproject.toml's extras)
PACKAGES: dict[str, tuple[str, str]] = {
    "onnx": ("onnx", "onnx"),
    "onnxruntime": ("onnxruntime", "onnx"),
    "onnxscript": ("onnxscript", "onnx"),
    "tensorflow": ("tensorflow-cpu", "tf"),
    "transformers": ("transformers", "hf"),
    "peft": ("peft", "lora"),
    "s3fs": ("s3fs", "s3"),
    "ossfs": ("ossfs", "oss"),
    "sqlalchemy": ("sqlalchemy", "sql"),
    "psycopg": ("psycopg[binary]", "sql"),
    "pyarrow": ("pyarrow", "parquet"),
    "openpyxl": ("openpyxl", "excel"),  # x-prepro parser: excel (xdpx/data/tables.py)
    "mlflow": ("mlflow-skinny", "mlflow"),
    "tensorboard": ("tensorboard", "tensorboard"),
    "jieba": ("jieba", "jieba"),
    "faiss": ("faiss-cpu", "faiss"),  # x-script build_index / search (a numpy matrix without it)
    "sentence_transformers": ("sentence-transformers", "st"),  # export_hf's check of a bi-encoder folder
    "captum": ("captum", "explain"),  # token attributions (xdpx/inference/explain.py)
}


class MissingPackage(UserError, ImportError):
    """An optional package is not installed. A UserError (the commands print one line, exit 1) and an
    ImportError (code that falls back when an import fails keeps doing so)."""


def install_line(module: str) -> str:
    """``pip install 'xdpx[EXTRA]'`` for the extra that brings ``module`` (a dotted name is fine)."""
    return f"pip install 'xdpx[{PACKAGES[_top(module)][1]}]'"


def missing_message(module: str, feature: str) -> str:
    """The one line a user reads when ``module`` is missing for ``feature``."""
    package = PACKAGES[_top(module)][0]
    return f"{feature} needs the optional package {package}: {install_line(module)}"


def installed(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it (for checks of a config before any work)."""
    try:
        return importlib.util.find_spec(_top(module)) is not None
    except (ImportError, ValueError):  # a half-installed package: its import would fail too
        return False


def require(module: str, feature: str) -> ModuleType:
    """``module`` imported, or :class:`MissingPackage` with the one line that says how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        message = missing_message(module, feature)
        missing = _top(e.name or "")
        if missing and missing != _top(module):  # the package is there, one of its own dependencies is not
            message += f" ({_top(module)} is installed but cannot import {missing}: reinstall it)"
        raise MissingPackage(message, name=_top(module)) from None


def _top(module: str) -> str:
    return module.split(".")[0]
