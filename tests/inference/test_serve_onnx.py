"""x-serve on an ONNX export directory: checked against its run at start, served through onnxruntime
when faster (or pinned to it); an export that does not match its run, or whose run is gone, is refused with the reason."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from serve_helpers import TEXTS

from xdpx.cli import UserError, x_script


@pytest.fixture(scope="module")
def onnx_export(cnn_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("onnxruntime", reason="pip install -e '.[onnx]'")
    root = tmp_path_factory.mktemp("onnx_export")
    config = root / "export.hjson"
    config.write_text(json.dumps({"save_dir": str(cnn_run), "out_dir": str(root / "onnx")}), encoding="utf-8")
    assert x_script(["export_onnx", str(config)]) == 0
    return root / "onnx"


def test_an_onnx_export_serves_the_runs_predictions(onnx_export: Path, cnn_run: Path) -> None:
    from xdpx.serve.onnx_backend import OnnxModel, load_onnx_predictor
    from xdpx.serve.predictor import load_for_serving, load_predictor

    said: list[str] = []
    # backend pinned: the requests below go through the onnxruntime session whichever is faster here
    served = load_onnx_predictor(str(onnx_export), threads=1, say=said.append, backend="onnxruntime")
    assert len(said) == 1 and "model.onnx matches the run's model (max |difference|" in said[0]
    assert said[0].endswith("serving with onnxruntime") and served.describe()["backend"] == "onnxruntime"
    assert isinstance(served.loaded.model, OnnxModel)
    reference = load_predictor(str(cnn_run), cpu=True)
    samples = [reference.encode(t) for t in TEXTS[:20]]
    for ours, theirs in zip(served.predict_samples(samples), reference.predict_samples(samples)):
        assert ours["label"] == theirs["label"] and abs(ours["prob"] - theirs["prob"]) < 1e-5
    pinned = load_onnx_predictor(str(onnx_export), threads=1, say=said.append, backend="pytorch")
    assert pinned.backend == "pytorch" and not isinstance(pinned.loaded.model, OnnxModel)
    automatic = load_onnx_predictor(str(onnx_export), threads=1, say=said.append)  # the faster of the two
    assert automatic.backend == ("onnxruntime" if isinstance(automatic.loaded.model, OnnxModel) else "pytorch")
    assert load_for_serving(str(cnn_run), cpu=True).backend == "pytorch"  # a run directory stays PyTorch


def test_an_export_that_differs_from_its_run_is_refused(onnx_export: Path, cnn_run: Path, tmp_path: Path) -> None:
    from xdpx.serve.onnx_backend import load_onnx_predictor

    changed = tmp_path / "changed"
    shutil.copytree(onnx_export, changed)
    record = json.loads((changed / "export.json").read_text(encoding="utf-8"))
    used = Path(record["checkpoint"]).name
    other = next(p for p in sorted(cnn_run.glob("checkpoint-*.pt")) if p.name != used)
    record["checkpoint"] = str(other)  # the run's weights at another step: the ONNX model no longer matches
    (changed / "export.json").write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(UserError, match="outputs differ from the eager model by up to .* export it again"):
        load_onnx_predictor(str(changed), say=lambda _m: None)

    record["save_dir"] = str(tmp_path / "moved")
    (changed / "export.json").write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(UserError, match="the run of this export .* is not here"):
        load_onnx_predictor(str(changed), say=lambda _m: None)


def test_bf16_does_not_apply_to_an_onnx_export(onnx_export: Path) -> None:
    from xdpx.serve.predictor import load_for_serving

    with pytest.raises(UserError, match="is an ONNX export, served in float32: --bf16 applies to a run directory"):
        load_for_serving(str(onnx_export), bf16=True)
