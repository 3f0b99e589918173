"""x-script export_torchscript / export_onnx on tiny trained runs of every non-BERT model."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from export_helpers import eager_and_batches, export

from xdpx.cli import x_script

MODELS = ["cls_cnn", "cls_lstm", "match_cnn", "re2"]


def assert_companions(out_dir, save_dir, inputs):
    assert (out_dir / "vocab.txt").read_text() == (save_dir / "vocab.txt").read_text()
    info = json.loads((out_dir / "export.json").read_text())
    assert info["inputs"] == inputs
    assert info["parity"].startswith("max |difference|")
    if (save_dir / "target_map.txt").exists():
        labels = (out_dir / "labels.txt").read_text().split()
        assert labels == info["labels"] and sorted(labels) == ["neg", "pos"]
    else:
        assert info["labels"] is None and not (out_dir / "labels.txt").exists()


@pytest.mark.parametrize("model", MODELS)
def test_torchscript_export_reloads_and_matches_eager_at_other_shapes(model, trained, tmp_path):
    save_dir = trained(model)
    code, out_dir = export("export_torchscript", tmp_path, save_dir)
    assert code == 0
    run, batches = eager_and_batches(save_dir)
    inputs = list(batches[0])
    assert inputs == (["tokens"] if model.startswith("cls_") else ["tokens1", "tokens2"])
    assert_companions(out_dir, save_dir, inputs)
    scripted = torch.jit.load(str(out_dir / "model.pt"))
    for batch in batches:
        with torch.no_grad():
            expected = run.model(**batch)
            actual = scripted(*[batch[n] for n in inputs])
        assert actual.shape == expected.shape
        torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("model", ["cls_cnn", "cls_lstm", "re2"])  # match_cnn: TorchScript only (time)
def test_onnx_export_has_dynamic_axes_and_matches_eager_in_onnxruntime(model, trained, tmp_path):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    save_dir = trained(model)
    code, out_dir = export("export_onnx", tmp_path, save_dir)
    assert code == 0
    run, batches = eager_and_batches(save_dir)
    inputs = list(batches[0])
    assert_companions(out_dir, save_dir, inputs)
    graph = onnx.load(str(out_dir / "model.onnx")).graph
    dims = {i.name: [d.dim_param for d in i.type.tensor_type.shape.dim] for i in graph.input}
    expected_dims = {"tokens": ["batch", "sequence"]} if len(inputs) == 1 else \
        {"tokens1": ["batch", "sequence_1"], "tokens2": ["batch", "sequence_2"]}
    assert dims == expected_dims
    session = ort.InferenceSession(str(out_dir / "model.onnx"))
    for batch in batches:
        (actual,) = session.run(None, {n: batch[n].numpy() for n in inputs})
        with torch.no_grad():
            expected = run.model(**batch).numpy()
        assert actual.shape == expected.shape
        np.testing.assert_allclose(actual, expected, atol=1e-5, rtol=1e-4)


def test_dry_run_checks_the_config_and_writes_nothing(trained, tmp_path, capsys):
    save_dir = trained("cls_cnn")
    config = tmp_path / "export.hjson"
    config.write_text(json.dumps({"save_dir": str(save_dir), "out_dir": str(tmp_path / "out")}))
    assert x_script(["export_onnx", str(config), "--dry"]) == 0
    assert "parity_samples" in capsys.readouterr().out and not (tmp_path / "out").exists()
    config.write_text(json.dumps({"save_dir": str(save_dir), "out_dir": str(tmp_path / "out"), "chekpoint": "<last>"}))
    assert x_script(["export_torchscript", str(config)]) == 2
    assert "export.hjson: unknown key 'chekpoint'. Did you mean 'checkpoint'?" in capsys.readouterr().err
    config.write_text(json.dumps({"save_dir": str(tmp_path / "nowhere"), "out_dir": str(tmp_path / "out")}))
    assert x_script(["export_torchscript", str(config)]) == 2
    assert f"key 'save_dir': path '{tmp_path / 'nowhere'}' does not exist" in capsys.readouterr().err
    assert x_script(["export_torchscript"]) == 2  # usage


def test_a_missing_checkpoint_or_data_is_a_clear_error(trained, tmp_path, capsys):
    save_dir = trained("cls_cnn")
    code, out_dir = export("export_torchscript", tmp_path, save_dir, checkpoint=str(save_dir / "checkpoint-999.pt"))
    assert code == 1
    assert "checkpoint-999.pt' does not exist" in capsys.readouterr().err
    code, out_dir = export("export_torchscript", tmp_path, save_dir, parity_data_dir=str(tmp_path))
    assert code == 1
    assert f"data_dir {tmp_path} holds no samples" in capsys.readouterr().err
    assert not (out_dir / "model.pt").exists()
