"""Every encoder x every head, generated from the registries: each pair a head supports on an encoder
trains 20 updates on tiny data, pauses at 10 and resumes bitwise to the run that never paused, x-eval of
its checkpoint equals its valid.log.tsv row, x-pred writes a prediction per line, and its TorchScript and
ONNX exports give the model's outputs when this test loads the files itself. A pair the head refuses is
refused by x-train --dry with exit 2 and the head's reason. A new encoder or head joins the matrix by its
registry line; the tables below must then say how to configure it (the test fails until they do)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.export.export_helpers import eager_and_batches, export
from xdpx.cli import run_chain
from xdpx.models.encoders import encoders
from xdpx.models.heads import heads

# encoder -> the processors' family (xdpx/models/encoders/*) and its tiny options
FAMILY = {"bert": "bert", "hf": "hf", "cnn": "words", "lstm": "words"}
ENCODER_OPTIONS = {
    "bert": {"pretrained_model": None, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
             "intermediate_size": 32, "max_position_embeddings": 64},
    "hf": {},  # pretrained_model: the tiny folder (set per test)
    "cnn": {"embedding_dim": 16, "num_filters": 8, "kernel_sizes": [2, 3]},
    "lstm": {"embedding_dim": 16, "hidden_size": 8},
}
# head -> the input shape it reads (tests/matrix/conftest.py SOURCES) and its loss and metric
SHAPE = {"classification": "single", "siamese": "pair", "tagging": "tags", "bi_encoder": "texts", "mlm": "corpus",
         "pretrain": "corpus_sop"}
HEAD_OPTIONS = {
    "classification": {"loss": "cross_entropy", "major_metric": "accuracy"},
    "siamese": {"loss": "mse", "major_metric": "pearson"},
    "tagging": {"task": "ner", "loss": "token_cross_entropy", "crf": True, "major_metric": "entity_f1"},
    "bi_encoder": {"loss": "info_nce", "major_metric": "mrr"},
    "mlm": {"loss": "mlm", "major_metric": "mlm_accuracy"},
    "pretrain": {"loss": "mlm_sop", "major_metric": "mlm_accuracy"},
}
# the raw file x-pred reads for each input shape (the samples' own dev files)
PREDICT_FILES = {"single": "examples/data/sample/reviews/dev.txt", "pair": "examples/data/sample/stsb/dev.tsv",
                 "tags": "examples/ner/data/dev.conll", "texts": "examples/retrieval/data/dev.tsv"}
REPO = Path(__file__).resolve().parents[2]
PAIRS = [(e, h) for e in encoders.names() for h in heads.names()]
SUPPORTED = [(e, h) for e, h in PAIRS if heads.get(h).refuses(encoders.get(e), None) is None]
REFUSED = [(e, h) for e, h in PAIRS if (e, h) not in SUPPORTED]


def config_of(encoder: str, head: str, data_dir: Path, save_dir: Path, matrix_root: Path, **extra: object) -> dict:
    options = dict(ENCODER_OPTIONS[encoder])
    if encoder == "hf":
        options["pretrained_model"] = str(matrix_root / "tiny_bert_hf")
    return {"__parent__": "${data_dir}/meta", "data_dir": str(data_dir), "save_dir": str(save_dir),
            "encoder": encoder, "head": head, **options, **HEAD_OPTIONS[head], "batch_size": 8,
            "learning_rate": 2e-3, "max_update": 20, "eval_interval": 10, "log_interval": 5, "valid_subset": "dev",
            "viz": False, "save_best_only": False, **extra}


def train(path: Path, config: dict) -> None:
    path.write_text(json.dumps(config, ensure_ascii=False))
    assert run_chain(["x-train", str(path)]) == 0


def weights(save_dir: Path, step: int) -> dict[str, torch.Tensor]:
    from xdpx.models.checkpoints import load_weights

    return load_weights(str(save_dir / f"checkpoint-{step}.pt"))


def last_valid_row(save_dir: Path) -> dict[str, float]:
    lines = (save_dir / "valid.log.tsv").read_text().splitlines()
    names = lines[0].split("\t")
    return dict(zip(names, map(float, lines[-1].split("\t"))))


def outputs_of(value: object) -> list[np.ndarray]:
    items = value if isinstance(value, (tuple, list)) else [value]
    return [np.asarray(v.detach().float().numpy() if hasattr(v, "detach") else v) for v in items]


@pytest.mark.parametrize(("encoder", "head"), SUPPORTED, ids=[f"{e}-{h}" for e, h in SUPPORTED])
def test_an_encoder_and_a_head_train_resume_evaluate_predict_and_export(encoder, head, matrix_data, matrix_root,
                                                                        tmp_path):
    shape = SHAPE[head]
    data = matrix_data(FAMILY[encoder], shape)
    straight, paused = tmp_path / "straight", tmp_path / "paused"
    train(tmp_path / "a.json", config_of(encoder, head, data, straight, matrix_root))
    train(tmp_path / "b.json", config_of(encoder, head, data, paused, matrix_root, train_steps=10))
    train(tmp_path / "c.json", config_of(encoder, head, data, paused, matrix_root, resume=True))
    a, b = weights(straight, 20), weights(paused, 20)
    assert a.keys() == b.keys()
    for name in a:  # paused at 10 and resumed: bit for bit the run that never paused
        assert torch.equal(a[name], b[name]), name

    # x-eval of the last checkpoint gives its row of valid.log.tsv
    out = tmp_path / "eval.tsv"
    (tmp_path / "eval.json").write_text(json.dumps({"save_dir": str(straight), "checkpoint": str(straight / "<last>"),
                                                    "valid_subset": "dev", "save_to_file": str(out)}))
    assert run_chain(["x-eval", str(tmp_path / "eval.json")]) == 0
    lines = out.read_text().splitlines()
    evaluated = dict(zip(lines[0].split("\t"), lines[-1].split("\t")))
    logged = last_valid_row(straight)
    major = HEAD_OPTIONS[head]["major_metric"]
    for key in ("loss", major):
        assert float(evaluated[key]) == pytest.approx(logged[key], rel=1e-5, abs=1e-6), key

    if shape in PREDICT_FILES:  # x-pred: one prediction per line of a raw file in the training format
        source = REPO / PREDICT_FILES[shape]
        predicted = tmp_path / "dev.pred.tsv"
        (tmp_path / "pred.json").write_text(json.dumps({"save_dir": str(straight),
                                                        "predict_file_map": {str(source): str(predicted)}}))
        assert run_chain(["x-pred", str(tmp_path / "pred.json")]) == 0
        rows = predicted.read_text(encoding="utf-8").splitlines()
        text = source.read_text(encoding="utf-8")
        records = len([b for b in text.split("\n\n") if b.strip()]) if shape == "tags" else len(text.splitlines())
        assert len(rows) == 1 + records, (len(rows), records)

    # exports: the test loads each file and compares with the eager model on batches of other shapes
    run, batches = eager_and_batches(straight)
    # torch.export captures nn.LSTM with a dynamic length once per process (a second capture specialises the
    # length: torch's LSTM decomposition), so the LSTM's ONNX export runs as a command of its own, for one head
    # (the export form is the encoder's, the same for every head; TorchScript checks each LSTM pair)
    onnx = encoder != "lstm" or head == "classification"
    for tool in ("export_torchscript", "export_onnx") if onnx else ("export_torchscript",):
        if tool == "export_onnx" and encoder == "lstm":
            out_dir = tmp_path / tool
            (tmp_path / "onnx.json").write_text(json.dumps({"save_dir": str(straight), "out_dir": str(out_dir)}))
            done = subprocess.run([sys.executable, "-m", "xdpx", tool, str(tmp_path / "onnx.json")],
                                  capture_output=True, text=True)
            assert done.returncode == 0, done.stderr[-2000:]
        else:
            code, out_dir = export(tool, tmp_path, straight)
            assert code == 0, tool
        names = json.loads((out_dir / "export.json").read_text())["inputs"]
        if tool == "export_torchscript":
            loaded = torch.jit.load(str(out_dir / "model.pt"))

            def call(batch, loaded=loaded, names=names):
                return loaded(*[batch[n] for n in names])
        else:
            import onnxruntime

            session = onnxruntime.InferenceSession(str(out_dir / "model.onnx"))

            def call(batch, session=session, names=names):
                return session.run(None, {n: batch[n].numpy() for n in names})
        for batch in batches:
            with torch.no_grad():
                expected, actual = outputs_of(run.model(**batch)), outputs_of(call(batch))
            assert len(expected) == len(actual)
            for want, got in zip(expected, actual):
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"{tool} {encoder}-{head}")


@pytest.mark.parametrize(("encoder", "head"), REFUSED, ids=[f"{e}-{h}" for e, h in REFUSED])
def test_a_head_refused_on_an_encoder_is_a_config_error_before_any_work(encoder, head, matrix_data, matrix_root,
                                                                        tmp_path, capsys):
    data = matrix_data(FAMILY[encoder], "single")
    path = tmp_path / "train.json"
    path.write_text(json.dumps(config_of(encoder, head, data, tmp_path / "run", matrix_root)))
    assert run_chain(["x-train", str(path), "--dry"]) == 2
    reason = heads.get(head).refuses(encoders.get(encoder), None)
    assert f"head {head} on encoder {encoder}: {reason}" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
