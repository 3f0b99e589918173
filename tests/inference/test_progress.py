"""Progress of long inference steps: a line on stderr every XDPX_PROGRESS_SECONDS when stderr is no terminal,
nothing when XDPX_QUIET is set or the step is quick, and stdout kept clean of it."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from inference_helpers import SAMPLE, write_json

from xdpx.cli import run_chain
from xdpx.utils.step_progress import Phases, StepProgress

TEST_TXT = SAMPLE / "reviews/test.txt"
LINE = re.compile(r"^x-(pred|eval) (\S+): (\d+)/(\d+) batches \((\d+)%\), [\d.]+ batches/s, about \S+ left$")


def test_lines_count_up_to_the_total_and_stop_before_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDPX_PROGRESS_SECONDS", "0")
    monkeypatch.delenv("XDPX_QUIET", raising=False)
    out = io.StringIO()  # not a terminal: lines, no bar
    with StepProgress(4, "x-pred test", stream=out) as shown:
        for _ in range(4):
            shown.update()
    lines = out.getvalue().splitlines()
    # a line after units 1, 2 and 3; the 4th ends the step, and "4/4" would only repeat what the command says next
    assert [line.split(" batches")[0] for line in lines] == ["x-pred test: 1/4", "x-pred test: 2/4", "x-pred test: 3/4"]
    assert lines[1].startswith("x-pred test: 2/4 batches (50%), ")


def test_quiet_and_quick_steps_print_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.delenv("XDPX_PROGRESS_SECONDS", raising=False)  # default: a line every 30 s
    with StepProgress(3, "quick", stream=out) as shown:
        for _ in range(3):
            shown.update()
    monkeypatch.setenv("XDPX_PROGRESS_SECONDS", "0")
    monkeypatch.setenv("XDPX_QUIET", "1")
    with StepProgress(3, "quiet", stream=out) as shown:
        for _ in range(3):
            shown.update()
    Phases("merge_lora", stream=out).start("merging")
    assert out.getvalue() == ""


def test_a_bad_interval_falls_back_to_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDPX_PROGRESS_SECONDS", "soon")
    assert StepProgress(2, "x", stream=io.StringIO()).interval == 30.0


def test_x_pred_and_x_eval_show_progress_on_stderr_only(cnn_run: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("XDPX_PROGRESS_SECONDS", "0")
    monkeypatch.delenv("XDPX_QUIET", raising=False)
    lines = TEST_TXT.read_text(encoding="utf-8").splitlines()
    out = tmp_path / "pred.tsv"
    config = write_json(tmp_path / "pred.hjson", {"save_dir": str(cnn_run), "batch_size": 4,
                                                  "predict_file_map": {str(TEST_TXT): str(out)}})
    assert run_chain(["x-pred", str(config)]) == 0
    captured = capfd.readouterr()
    shown = [line for line in captured.err.splitlines() if line.startswith("x-pred ")]
    batches = -(-len(lines) // 4)
    assert len(shown) == batches - 1, captured.err
    assert all(LINE.match(line) for line in shown), shown
    assert LINE.match(shown[-1]).group(3, 4) == (str(batches - 1), str(batches))
    assert "batches/s" not in captured.out

    config = write_json(tmp_path / "eval.hjson", {"save_dir": str(cnn_run), "valid_subset": "dev"})
    assert run_chain(["x-eval", str(config)]) == 0
    err = capfd.readouterr().err
    assert any(LINE.match(line) and line.startswith("x-eval dev: 1/") for line in err.splitlines()), err
