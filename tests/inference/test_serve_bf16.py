"""x-serve --bf16: forward passes under bfloat16 autocast, with the difference from float32 on the run's
samples measured and said at start."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from serve_helpers import TEXTS


def test_bf16_serves_close_to_float32_and_says_how_close(cnn_run: Path, capsys: pytest.CaptureFixture) -> None:
    from xdpx.serve.predictor import load_for_serving

    exact = load_for_serving(str(cnn_run), cpu=True)
    half = load_for_serving(str(cnn_run), cpu=True, bf16=True)
    said = capsys.readouterr().err
    found = re.search(r"x-serve: --bf16: on (\d+) samples of the run's data the probabilities differ from float32 "
                      r"by at most (\S+), the labels agree on (\d+) of (\d+); they take [\d.]+ ms in bfloat16, "
                      r"[\d.]+ ms in float32", said)
    assert found, said
    count, largest, agree = int(found.group(1)), float(found.group(2)), int(found.group(3))
    assert count == int(found.group(4)) > 0 and 0 < largest < 0.05 and agree >= count - 1
    assert (exact.backend, half.backend, half.describe()["backend"]) == ("pytorch", "pytorch-bf16", "pytorch-bf16")

    inputs = TEXTS[:16]
    for a, b in zip(exact.predict_inputs(inputs), half.predict_inputs(inputs)):
        assert set(a["probabilities"]) == set(b["probabilities"])
        assert max(abs(a["probabilities"][k] - b["probabilities"][k]) for k in a["probabilities"]) < 0.05
    # bfloat16 really ran: not every probability is float32's to 1e-6
    assert any(abs(a["prob"] - b["prob"]) > 1e-6 for a, b in zip(exact.predict_inputs(inputs),
                                                               half.predict_inputs(inputs)))
