"""Fixtures of the reliability tests (generic: every test file of this folder may use them)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from xdpx.cli import run_chain


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str]]:
    """``cli('x-train', config, '--dry')`` -> (exit code, stdout + stderr of that call)."""

    def run(*argv: object) -> tuple[int, str]:
        capsys.readouterr()
        code = run_chain([str(a) for a in argv])
        captured = capsys.readouterr()
        return code, captured.out + captured.err

    return run
