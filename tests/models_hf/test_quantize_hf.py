"""x-script quantize on a model of the transformers family (a tiny random roberta through hf_classification,
trained a few updates): its Linear layers become int8 on both backends and x-eval reads the figures quantize wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xdpx.cli import run_chain, x_script

pytestmark = pytest.mark.usefixtures("one_thread")


def test_a_transformers_model_quantizes_on_both_backends(hf_models: dict[str, Path], hf_polarity: dict[str, Path],
                                                         tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime", reason="pip install -e '.[onnx]'")
    config = {"__parent__": "${data_dir}/meta", "data_dir": str(hf_polarity["roberta"]), "save_dir": str(tmp_path / "run"),
              "pretrained_model": str(hf_models["roberta"]), "model": "hf_classification", "loss": "cross_entropy",
              "learning_rate": 2e-3, "batch_size": 16, "max_update": 4, "eval_interval": 4, "major_metric": "accuracy"}
    (tmp_path / "train.hjson").write_text(json.dumps(config))
    assert run_chain(["x-train", str(tmp_path / "train.hjson")]) == 0
    assert x_script(["quantize", str(tmp_path / "run"), "--out", str(tmp_path / "int8"), "--tolerance", "100"]) == 0
    record = json.loads((tmp_path / "int8" / "int8.json").read_text())
    # 2 layers x (query, key, value, attention output, intermediate, output) + the classifier
    assert record["torch"]["int8_layers"] == {"Linear": 2 * 6 + 1}
    stored = set(record["torch"]["stored_int8"])  # its 600-token vocabulary is under 1,000 rows: float32
    assert "classifier.weight" in stored and not any("embeddings" in k for k in stored)
    report = json.loads((tmp_path / "int8" / "quantize.json").read_text())
    for backend in ("torch", "onnx"):
        (tmp_path / f"{backend}.hjson").write_text(json.dumps({
            "save_dir": str(tmp_path / "int8"), "valid_subset": "dev", "backend": backend, "cuda": False,
            "save_to_file": str(tmp_path / f"{backend}.tsv")}))
        assert run_chain(["x-eval", str(tmp_path / f"{backend}.hjson")]) == 0
        header, row = (line.split("\t") for line in (tmp_path / f"{backend}.tsv").read_text().splitlines()[:2])
        values = dict(zip(header, row))
        assert float(values["accuracy"]) == pytest.approx(report[f"int8_{backend}"]["accuracy"], abs=5e-7)  # the TSV keeps 6 digits
        assert 0 < report[f"int8_{backend}"]["max_probability_difference"] < 0.05
