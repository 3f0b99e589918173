"""ruff (configured in pyproject.toml) is part of the test run, so style problems do not land."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_is_clean():
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.fail("ruff is not installed: it is in the [test] extra (pip install -e '.[test]')")
    out = subprocess.run([ruff, "check", "xdpx", "tests", "bench", "examples"], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
