"""The x-train tests' folder (their fixtures, e.g. ``reviews``, are in tests/conftest.py, shared with other folders;
the faulty_cnn test model is unregistered after each test there too)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


