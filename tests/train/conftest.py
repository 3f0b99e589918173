"""Fixtures of the x-train tests: real x-prepro output of the committed review samples."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def forget_test_components():
    """The faulty_cnn test model (user_dir) must not stay registered for later tests (e.g. the
    generated option docs check lists every registered model)."""
    yield
    import sys

    from xdpx.models import models

    models._entries.pop("faulty_cnn", None)
    sys.modules.pop("faulty_components", None)
