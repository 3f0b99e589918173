"""x-script quantize: int8 models of tiny trained runs (BiLSTM, TextCNN, our BERT), read back by x-eval,
x-pred and x-serve on both backends; the tolerance refusal and the bad inputs leave nothing written; x-train
never trains an int8 model."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from xdpx.cli import run_chain, x_script

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "inference"))
from serve_helpers import TEXTS, request, running_server  # noqa: E402

pytest.importorskip("onnxruntime", reason="pip install -e '.[onnx]'")


def quantize(save_dir: Path, out: Path, *flags: str) -> int:
    return x_script(["quantize", str(save_dir), "--out", str(out), *flags])


@pytest.fixture(scope="module")
def lstm_int8(trained, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("quantized") / "lstm_int8"
    assert quantize(trained("cls_lstm"), out) == 0
    return out


def test_the_int8_folder_holds_int8_weights_that_load_without_pickle(lstm_int8: Path, trained) -> None:
    from safetensors import safe_open

    record = json.loads((lstm_int8 / "int8.json").read_text())
    assert record["quantization"] == "int8" and record["torch"]["int8_layers"] == {"LSTM": 1, "Linear": 2}
    assert record["onnx"]["file"] == "model_int8.onnx" and record["onnx"]["inputs"] == ["tokens"]
    assert record["source"].startswith(str(trained("cls_lstm")))
    assert (lstm_int8 / "args.py").read_text().startswith("# int8 model (quantization: int8) written by x-script quantize")
    with safe_open(str(lstm_int8 / "model_int8.safetensors"), framework="pt") as f:
        dtypes = {k: str(f.get_tensor(k).dtype) for k in f.keys()}
    stored = record["torch"]["stored_int8"]
    assert stored and all(dtypes[k] == "torch.int8" and dtypes[k + ".int8_scale"] == "torch.float32" for k in stored)
    assert {"encoder.lstm.weight_ih_l0", "encoder.lstm.weight_hh_l0_reverse", "dense.weight"} <= set(stored)
    report = json.loads((lstm_int8 / "quantize.json").read_text())
    assert report["split"] == "dev" and report["major_metric"] == "accuracy"
    assert report["size_bytes"]["int8_torch"] < report["size_bytes"]["fp32"] / 2
    for backend in ("torch", "onnx"):
        row = report[f"int8_{backend}"]
        assert row["loss_points"] == pytest.approx(100 * (report["fp32"]["accuracy"] - row["accuracy"]))
        assert 0 < row["max_probability_difference"] < 0.05
    assert report["backend"] == record["backend"] in ("torch", "onnx")
    assert sorted(p.name for p in lstm_int8.parent.iterdir()) == ["lstm_int8"]  # no temporary folder left


def test_the_int8_lstm_runs_the_engines_own_int8_weights_not_rounded_twice(lstm_int8: Path, trained) -> None:
    import copy

    import torch

    from xdpx.data.dataset import open_split
    from xdpx.export.loading import load_run
    from xdpx.export.quantize import load_folder
    from xdpx.models import int8

    run = load_run(str(trained("cls_lstm")))
    engine = int8.dynamic_int8(copy.deepcopy(run.model))  # torch.ao straight from the float weights
    loaded = load_folder(str(lstm_int8), "torch")
    # the head reads its layers through its own attributes: they are the int8 ones the model holds
    head = loaded.model.task_head
    assert head.classifier is loaded.model.classifier and head.dense is loaded.model.dense
    assert "DynamicQuantizedLinear" in repr(head.classifier) and "DynamicQuantizedLinear" in repr(head.dense)
    ours, theirs = (int8.lstm_int8_weights(m.get_submodule("encoder.lstm")) for m in (loaded.model, engine))
    assert sorted(ours) == ["weight_hh_l0", "weight_hh_l0_reverse", "weight_ih_l0", "weight_ih_l0_reverse"]
    for key, weight in theirs.items():  # the same int8 values: stored as the engine made them, not re-rounded
        assert torch.equal(ours[key].int_repr(), weight.int_repr()), key
        assert ours[key].q_scale() == pytest.approx(weight.q_scale(), rel=1e-6), key
    # the embedding table is int8 on disk (float32 in memory, not the run's exact values), so the outputs are
    # compared with the engine's LSTM and Linear layers on the loaded model's own embeddings
    engine = int8.dynamic_int8(copy.deepcopy(run.model))
    tables = [name for name, m in engine.named_modules() if isinstance(m, torch.nn.Embedding)]
    assert tables
    for name in tables:
        engine.get_submodule(name).weight.data.copy_(loaded.model.get_submodule(name).weight)
    dev = open_split(run.args.data_dir, "dev")
    net_input = run.processor.collate([dev[i] for i in range(8)])["net_input"]
    with torch.inference_mode():
        torch.testing.assert_close(loaded.model(**net_input), engine(**net_input), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["torch", "onnx"])
def test_x_eval_of_the_int8_model_gives_the_metric_quantize_wrote(lstm_int8: Path, tmp_path: Path, backend: str) -> None:
    report = json.loads((lstm_int8 / "quantize.json").read_text())[f"int8_{backend}"]
    config = tmp_path / "eval.hjson"
    config.write_text(json.dumps({"save_dir": str(lstm_int8), "valid_subset": "dev", "backend": backend,
                                  "cuda": False, "save_to_file": str(tmp_path / "eval.tsv")}))
    assert run_chain(["x-eval", str(config)]) == 0
    header, row = (line.split("\t") for line in (tmp_path / "eval.tsv").read_text().splitlines()[:2])
    values = dict(zip(header, row))
    assert float(values["accuracy"]) == pytest.approx(report["accuracy"], abs=1e-12)
    assert float(values["loss"]) == pytest.approx(report["loss"], rel=1e-6)


def test_x_serve_answers_the_same_labels_on_both_backends(lstm_int8: Path) -> None:
    texts = TEXTS[:24]
    answers = {}
    for backend in ("torch", "onnx"):
        with running_server(lstm_int8, "--backend", backend) as server:
            status, health, _ = request(server.address, "GET", "/health")
            assert status == 200 and health["precision"] == "int8"
            assert health["backend"] == {"torch": "pytorch", "onnx": "onnxruntime"}[backend]
            _, metrics, _ = request(server.address, "GET", "/metrics")
            assert f'xdpx_serve_model{{backend="{health["backend"]}",precision="int8"}} 1.0' in metrics
            status, answer, _ = request(server.address, "POST", "/predict", json.dumps(texts).encode())
            assert status == 200 and len(answer) == len(texts)
            answers[backend] = answer
    assert [a["label"] for a in answers["torch"]] == [a["label"] for a in answers["onnx"]]
    largest = max(abs(a["prob"] - b["prob"]) for a, b in zip(answers["torch"], answers["onnx"]))
    assert largest < 0.01


def test_x_pred_takes_the_backend_and_a_plain_run_refuses_onnx(lstm_int8: Path, trained, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    labels = {}
    for backend in ("torch", "onnx"):
        config = tmp_path / f"pred_{backend}.hjson"
        out = tmp_path / f"{backend}.tsv"
        config.write_text(json.dumps({"save_dir": str(lstm_int8), "backend": backend, "cuda": False,
                                      "predict_file_map": {"test": str(out)}}))
        assert run_chain(["x-pred", str(config)]) == 0
        labels[backend] = [line.split("\t")[2] for line in out.read_text().splitlines()[1:]]
    assert len(labels["torch"]) == 60 and labels["torch"] == labels["onnx"]
    config = tmp_path / "plain.hjson"
    config.write_text(json.dumps({"save_dir": str(trained("cls_lstm")), "backend": "onnx", "cuda": False,
                                  "predict_file_map": {"test": str(tmp_path / "plain.tsv")}}))
    assert run_chain(["x-pred", str(config)]) == 2
    assert "key 'backend': onnx: " in capsys.readouterr().err and not (tmp_path / "plain.tsv").exists()
    config.write_text(json.dumps({"save_dir": str(lstm_int8), "checkpoint": str(trained("cls_lstm") / "checkpoint-4.pt"),
                                  "cuda": False, "predict_file_map": {"test": str(tmp_path / "fixed.tsv")}}))
    assert run_chain(["x-pred", str(config)]) == 2  # an int8 folder's weights are its own
    assert "key 'checkpoint': " in capsys.readouterr().err and not (tmp_path / "fixed.tsv").exists()


def test_x_train_never_trains_an_int8_model(lstm_int8: Path, trained, capsys: pytest.CaptureFixture[str]) -> None:
    before = sorted(p.name for p in lstm_int8.iterdir())
    config = json.loads((trained("cls_lstm").parent / "train_cls_lstm.hjson").read_text())
    for key, extra in (("save_dir", {"save_dir": str(lstm_int8), "resume": True}),
                       ("pretrained_model", {"save_dir": str(lstm_int8.parent / "new"),
                                             "pretrained_model": str(lstm_int8 / "model_int8.safetensors")})):
        path = lstm_int8.parent / f"train_{key}.hjson"
        path.write_text(json.dumps({**config, **extra}))
        assert run_chain(["x-train", str(path)]) == 2
        err = capsys.readouterr().err
        assert f"key '{key}': " in err and "is an int8 model written by x-script quantize" in err
        path.unlink()
    assert sorted(p.name for p in lstm_int8.iterdir()) == before and not (lstm_int8.parent / "new").exists()


@pytest.mark.parametrize("name", ["cls_cnn", "bert_classification"])
def test_textcnn_and_our_bert_quantize(name: str, trained, bert_trained, tmp_path: Path) -> None:
    run = trained(name) if name.startswith("cls_") else bert_trained(name)
    assert quantize(run, tmp_path / "int8", "--onnx", "false") == 0
    record = json.loads((tmp_path / "int8" / "int8.json").read_text())
    layers = record["torch"]["int8_layers"]
    # TextCNN: its output layer (the convolutions stay float32); BERT: every attention and feed-forward Linear
    assert layers == ({"Linear": 1} if name == "cls_cnn" else {"Linear": 2 * 6 + 2})
    assert record["onnx"] is None and record["backend"] == "torch"
    report = json.loads((tmp_path / "int8" / "quantize.json").read_text())
    assert "int8_onnx" not in report and abs(report["int8_torch"]["loss_points"]) <= 1
    from xdpx.export.quantize import load_folder

    loaded = load_folder(str(tmp_path / "int8"), None)
    assert loaded.precision == "int8" and "DynamicQuantized" in repr(loaded.model)


def test_our_berts_int8_query_key_value_run_as_one_matmul_with_the_three_layers_output(bert_trained,
                                                                                      tmp_path: Path) -> None:
    import torch

    from xdpx.data.dataset import open_split
    from xdpx.export.quantize import load_folder

    assert quantize(bert_trained("bert_classification"), tmp_path / "int8", "--onnx", "false") == 0
    loaded = load_folder(str(tmp_path / "int8"), None)
    attentions = [m for m in loaded.model.modules() if hasattr(m, "int8_qkv")]
    assert len(attentions) == 2 and all(m.int8_qkv is not None for m in attentions)
    assert not any("int8_qkv" in key for key in loaded.model.state_dict())  # the three layers stay the stored ones
    dev = open_split(loaded.data_dir, "dev")
    net_input = loaded.processor.collate([dev[i] for i in range(min(8, len(dev)))])["net_input"]
    with torch.inference_mode():
        fused = loaded.model(**net_input)
        for m in attentions:
            m.int8_qkv = None  # back to query, key and value one by one
        separate = loaded.model(**net_input)
    assert torch.equal(fused, separate)


def test_a_model_losing_more_than_the_tolerance_is_refused_and_nothing_is_written(
        trained, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the tiny match_cnn loses 0.12 points of Pearson on its dev split in int8 (measured; seeded)
    assert quantize(trained("match_cnn"), tmp_path / "int8", "--tolerance", "0.05", "--onnx", "false") == 2
    err = capsys.readouterr().err
    assert re.search(r"refused, nothing written: int8 torch loses 0\.\d+ points of pearson on dev "
                     r"\(-?0\.\d+ -> -?0\.\d+\), more than --tolerance 0\.05", err), err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("flags, message", [
    (["--tolerance", "101"], "--tolerance 101 is out of range"),
    (["--tolerance", "-1"], "--tolerance -1 is out of range"),
    (["--split", "valid"], "--split 'valid' is not a split of the run's data_dir"),
])
def test_bad_input_is_one_line_and_exit_2(flags: list[str], message: str, trained, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert quantize(trained("cls_cnn"), tmp_path / "int8", *flags, "--onnx", "false") == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_a_folder_that_is_not_a_run_and_an_unsupported_model_are_refused(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from torch import nn

    from xdpx.config.errors import ConfigError
    from xdpx.export.quantize import supported_layers

    (tmp_path / "notes").mkdir()
    assert quantize(tmp_path / "notes", tmp_path / "int8") == 2
    assert "notes is not a run directory of x-train" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes"]
    with pytest.raises(ConfigError, match=r"model convs has no Linear or LSTM layer to run in int8 \(its layers "
                                          r"with weights: Conv1d, Embedding\): it is not supported"):
        supported_layers(nn.Sequential(nn.Embedding(10, 4), nn.Conv1d(4, 4, 2)), "convs")
