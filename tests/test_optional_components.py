"""XDPX_REQUIRE (tests/optional_components.py): with a component required and its module blocked, the
tests that use it fail naming the install; without the flag they skip as before."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import optional_components
import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("component", sorted(optional_components.COMPONENTS))
def test_a_required_component_that_does_not_import_fails_with_its_install(component, monkeypatch):
    modules, install = optional_components.COMPONENTS[component]
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)  # import raises ImportError, as when not installed
    monkeypatch.delenv("XDPX_REQUIRE", raising=False)
    monkeypatch.delenv(f"XDPX_REQUIRE_{component.upper()}", raising=False)
    with pytest.raises(pytest.skip.Exception):
        pytest.importorskip(modules[0])
    for flag, value in (("XDPX_REQUIRE", "all"), ("XDPX_REQUIRE", f"pandas,{component}"),
                        (f"XDPX_REQUIRE_{component.upper()}", "1")):
        with monkeypatch.context() as m:
            m.setenv(flag, value)
            for module in modules:
                with pytest.raises(pytest.fail.Exception) as failed:
                    pytest.importorskip(module, reason="a reason that names no package")
                assert f"component {component!r} is required but {module} does not import" in str(failed.value)
                assert install in str(failed.value)


def test_other_modules_still_skip_and_installed_ones_import(monkeypatch):
    monkeypatch.setenv("XDPX_REQUIRE", "all")
    with pytest.raises(pytest.skip.Exception):
        pytest.importorskip("xdpx_no_such_module_here")
    assert pytest.importorskip("json").dumps([1]) == "[1]"


def test_an_unknown_component_name_is_refused(monkeypatch):
    monkeypatch.setenv("XDPX_REQUIRE", "onnxruntim")
    with pytest.raises(pytest.UsageError, match=r"unknown components \['onnxruntim'\]"):
        optional_components.required_components()


def run_blocked(module: str, target: str, require: str | None) -> subprocess.CompletedProcess[str]:
    """pytest on ``target`` in a fresh process where ``module`` does not import (no xdist workers: they
    would be fresh processes where it does)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDPX_REQUIRE")}
    if require:
        env["XDPX_REQUIRE"] = require
    code = (f"import sys; sys.modules[{module!r}] = None; import pytest; "
            f"sys.exit(pytest.main([{target!r}, '-q', '-n', '0', '-p', 'no:cacheprovider', '-p', 'no:randomly']))")
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)


def test_a_collected_test_fails_when_its_required_package_is_blocked():
    target = "tests/viz/test_viz.py::test_tensorboard_event_files_mirror_the_logs"
    skipped = run_blocked("tensorboard", target, None)
    assert skipped.returncode == 0, skipped.stdout[-2000:]
    assert "SKIPPED [1] tests/viz/test_viz.py:" in skipped.stdout and "FAILED" not in skipped.stdout
    failed = run_blocked("tensorboard", target, "all")
    assert failed.returncode == 1 and f"FAILED {target}" in failed.stdout, failed.stdout[-2000:]
    assert ("XDPX_REQUIRE: component 'tensorboard' is required but tensorboard does not import" in failed.stdout
            and optional_components.COMPONENTS["tensorboard"][1] in failed.stdout)


def test_a_module_level_importorskip_fails_the_collection():
    failed = run_blocked("transformers", "tests/bert/test_bert_models.py", "transformers")
    assert failed.returncode != 0 and "ERROR tests/bert/test_bert_models.py" in failed.stdout, failed.stdout[-2000:]
    assert "component 'transformers' is required but transformers does not import" in failed.stdout
