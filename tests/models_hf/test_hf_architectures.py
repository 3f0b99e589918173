"""Every architecture of the transformers family, from a real model folder written by transformers
(tiny random weights): x-prepro with its own tokenizer, x-train 20 updates, a pause at update 10 and
resume: true ending bitwise equal to the uninterrupted run, x-eval == valid.log.tsv, and an export whose
outputs match the eager model (ONNX through onnxruntime, or TorchScript). The SIGKILL variant of the
resume runs in test_hf_downstream.py for one architecture (a subprocess each time costs seconds)."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from hf_builders import ARCHITECTURES

from xdpx.cli import run_chain, x_script
from xdpx.export.loading import load_run
from xdpx.export.parity import real_samples

# a short run with every policy that carries state: eval and best, lr warmup and decay, dropout
TRAIN = {"model": "hf_classification", "loss": "cross_entropy", "learning_rate": 2e-3, "batch_size": 16,
         "max_update": 20, "eval_interval": 5, "log_interval": 4, "major_metric": "accuracy",
         "lr_scheduler": "linear_decay", "warmup_steps": 4, "save_best_only": True, "save_last_only": True}
# ONNX (the dynamo exporter) costs several seconds a model: a representative set; the others export to
# TorchScript, whose trace goes through the same transformers code
ONNX = ("roberta", "deberta-v2", "modernbert", "distilbert")


pytestmark = pytest.mark.usefixtures("one_thread")


def write(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(json.dumps(config, indent=1))
    return path


def train(root: Path, name: str, data_dir: Path, pretrained: Path, **extra: Any) -> Path:
    config = {"__parent__": "${data_dir}/meta", "data_dir": str(data_dir), "save_dir": str(root / name),
              "pretrained_model": str(pretrained), **TRAIN, **extra}
    assert run_chain(["x-train", str(write(root / f"{name}.hjson", config))]) == 0
    return root / name


def read_tsv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def final_weights(save_dir: Path) -> dict[str, torch.Tensor]:
    from xdpx.models.checkpoints import load_torch

    return load_torch(str(save_dir / "state.pt"))["model"]


@pytest.mark.slow
@pytest.mark.parametrize("architecture", list(ARCHITECTURES))
def test_architecture_trains_resumes_bitwise_evaluates_and_exports(architecture, hf_models, hf_polarity, tmp_path):
    model_dir, data_dir = hf_models[architecture], hf_polarity[architecture]
    reference = train(tmp_path, "reference", data_dir, model_dir)
    log = (reference / "log.txt").read_text()
    assert f"loaded pretrained_model {model_dir}" in log
    args = (reference / "args.py").read_text()
    assert f"'model_type': '{architecture}'" in args and "***" not in args

    # paused after 10 updates, then resumed: bitwise the same weights and the same evaluations
    paused = train(tmp_path, "paused", data_dir, model_dir, train_steps=10)
    assert "paused at update 10" in (paused / "log.txt").read_text()
    train(tmp_path, "paused", data_dir, model_dir, resume=True)
    want, got = final_weights(reference), final_weights(paused)
    assert want.keys() == got.keys() and any(k.startswith("encoder.") for k in want)
    for key in want:
        assert torch.equal(want[key], got[key]), key
    assert (paused / "valid.log.tsv").read_text() == (reference / "valid.log.tsv").read_text()
    # the encoder trained from the pretrained weights (loaded, then moved: not frozen by accident)
    from safetensors.torch import load_file

    pretrained = load_file(str(model_dir / "model.safetensors"))
    shared = [k for k in pretrained if f"encoder.{k}" in want]
    assert len(shared) >= len(pretrained) - 2  # all but an unused pooler
    assert any(not torch.equal(pretrained[k], want[f"encoder.{k}"]) for k in shared)

    # x-eval of the last checkpoint gives the numbers of valid.log.tsv's last row
    out = tmp_path / "scores.tsv"
    config = {"save_dir": str(reference), "valid_subset": "dev", "checkpoint": f"{reference}/<last>",
              "save_to_file": str(out)}
    assert run_chain(["x-eval", str(write(tmp_path / "eval.hjson", config))]) == 0
    [row] = read_tsv(out)
    last = read_tsv(reference / "valid.log.tsv")[-1]
    for column in ("loss", "accuracy", "auc", "macro_f1"):
        assert row[column] == last[column], column

    tool = "export_onnx" if architecture in ONNX else "export_torchscript"
    config = {"save_dir": str(reference), "out_dir": str(tmp_path / tool)}
    assert x_script([tool, str(write(tmp_path / f"{tool}.hjson", config))]) == 0
    info = json.loads((tmp_path / tool / "export.json").read_text())
    assert info["parity"].startswith("max |difference|"), info["parity"]
    assert float(info["parity"].split()[2]) <= 1e-4
    # the exported file as a user loads it (onnxruntime / torch.jit.load) against the run's model, here
    run, exported = load_run(str(reference)), load_exported(tmp_path / tool)
    samples = real_samples(run.args, 40)
    for chosen in (samples[-5:], samples[12:14]):
        batch = run.processor.collate(chosen)["net_input"]
        with torch.no_grad():
            expected = run.model(**batch)
        actual = exported([batch[n] for n in info["inputs"]])
        assert actual.shape == expected.shape
        torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)


def load_exported(out_dir: Path) -> Callable[[list[torch.Tensor]], torch.Tensor]:
    """The model of export_onnx (in onnxruntime) or export_torchscript: positional inputs -> its output."""
    if (out_dir / "model.onnx").exists():
        import onnxruntime

        session = onnxruntime.InferenceSession(str(out_dir / "model.onnx"), providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        return lambda tensors: torch.from_numpy(session.run(None, dict(zip(names, (t.numpy() for t in tensors))))[0])
    scripted = torch.jit.load(str(out_dir / "model.pt"))
    return lambda tensors: scripted(*tensors).detach()
