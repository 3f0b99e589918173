"""Helpers of the export tests (fixtures are in conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from xdpx.cli import x_script


def export(tool: str, tmp_path: Path, save_dir: Path, **options: Any) -> tuple[int, Path]:
    """Run ``x-script <tool> config`` for save_dir; return the exit code and out_dir."""
    out_dir = tmp_path / tool
    config = tmp_path / f"{tool}.hjson"
    config.write_text(json.dumps({"save_dir": str(save_dir), "out_dir": str(out_dir), **options}))
    return x_script([tool, str(config)]), out_dir


def eager_and_batches(save_dir: Path) -> tuple[Any, list[dict[str, Any]]]:
    """The run's eager model and real batches of shapes the export was not traced on (5 and 2 samples)."""
    from xdpx.export.loading import load_run
    from xdpx.export.parity import real_samples

    run = load_run(str(save_dir))
    samples = real_samples(run.args, 40)
    batches = [run.processor.collate(samples[-5:])["net_input"], run.processor.collate(samples[12:14])["net_input"]]
    return run, batches
