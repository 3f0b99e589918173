"""NER runs end to end: x-eval == valid.log.tsv, exact resume, x-pred entity spans, x-serve /predict, bert_ner."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from ner_helpers import CHINESE_VOCAB, SAMPLE, prepro, read_tsv, train_config, write_json

from xdpx.cli import run_chain, x_script
from xdpx.data.tags import entity_spans, units_of
from xdpx.serve.predictor import BadInput, load_predictor

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "inference"))

from serve_helpers import request, running_server  # noqa: E402
from train_helpers import assert_same_weights, final_weights  # noqa: E402

METRICS = ("loss", "entity_f1", "entity_precision", "entity_recall", "token_accuracy", "entity_f1_LOC",
           "entity_f1_ORG", "entity_f1_PER")


def test_eval_of_best_equals_its_row_of_valid_log(crf_run, tmp_path):
    rows = read_tsv(crf_run / "valid.log.tsv")
    assert list(rows[0])[3:3 + len(METRICS)] == list(METRICS)
    best = next(r for r in rows if r["step"] == rows[-1]["best_step"])
    out = tmp_path / "eval.tsv"
    config = write_json(tmp_path / "eval.hjson", {"save_dir": str(crf_run), "valid_subset": "dev",
                                                  "save_to_file": str(out)})
    assert run_chain(["x-eval", str(config)]) == 0
    [row] = read_tsv(out)
    assert {m: row[m] for m in METRICS} == {m: best[m] for m in METRICS}
    # the raw CoNLL file scores as its split does
    raw = write_json(tmp_path / "raw.hjson", {"save_dir": str(crf_run), "valid_subset": str(SAMPLE / "dev.conll"),
                                              "save_to_file": str(out), "save_mode": "w"})
    assert run_chain(["x-eval", str(raw)]) == 0
    [row] = read_tsv(out)
    assert {m: row[m] for m in METRICS} == {m: best[m] for m in METRICS}


def test_paused_and_resumed_run_ends_bitwise_equal(ner_data, crf_run, tmp_path):
    save_dir = tmp_path / "run"
    assert run_chain(["x-train", str(train_config(tmp_path / "a.hjson", ner_data, save_dir, train_steps=7))]) == 0
    assert "paused at update 7" in (save_dir / "log.txt").read_text()
    assert run_chain(["x-train", str(train_config(tmp_path / "b.hjson", ner_data, save_dir, resume=True))]) == 0
    assert_same_weights(final_weights(save_dir), final_weights(crf_run))
    assert (save_dir / "valid.log.tsv").read_text() == (crf_run / "valid.log.tsv").read_text()


def test_pred_writes_entities_as_character_spans_of_the_input(crf_run, tmp_path):
    tsv, npz = tmp_path / "dev.pred.tsv", tmp_path / "dev.pred.npz"
    for out, binary in ((tsv, False), (npz, True)):
        config = write_json(tmp_path / "pred.hjson", {"save_dir": str(crf_run), "binary": binary,
                                                      "predict_file_map": {str(SAMPLE / "dev.conll"): str(out)}})
        assert run_chain(["x-pred", str(config)]) == 0
    rows = read_tsv(tsv)
    assert list(rows[0]) == ["text", "label", "entities"] and len(rows) == 100
    arrays = np.load(npz)
    labels = list(arrays["labels"])
    found = 0
    for row, tags in zip(rows, arrays["tags"]):
        text = row["text"]
        assert " " not in text  # a character per CoNLL line: the text as it reads
        tags = [labels[k] for k in tags if k >= 0]
        assert len(tags) == min(len(text), 64)  # max_len 64: units past it get no tag
        offsets = units_of(text, "char")
        expected = [{"text": text[offsets[a][0]:offsets[b - 1][1]], "type": kind, "start": offsets[a][0],
                     "end": offsets[b - 1][1]} for a, b, kind in entity_spans(tags)]
        entities = json.loads(row["entities"])
        assert entities == expected
        found += len(entities)
    assert found > 0, "the fixture run should predict some entities"


def test_serve_returns_entities_of_each_text(crf_run):
    texts = ["在这一年，以江泽民同志为核心的党中央", "北京"]
    with running_server(crf_run) as server:
        status, answer, _ = request(server.address, "POST", "/predict",
                                    json.dumps(texts).encode(), {"Content-Type": "application/json"})
    assert status == 200, answer
    predictions = answer
    assert len(predictions) == 2
    for text, prediction in zip(texts, predictions):
        assert len(prediction["tags"]) == len(text)
        spans = entity_spans(prediction["tags"])
        assert [(e["start"], e["end"], e["type"]) for e in prediction["entities"]] == spans
        assert all(e["text"] == text[e["start"]:e["end"]] for e in prediction["entities"])


def test_serve_refuses_a_nul_and_a_lone_surrogate_as_x_prepro_does(crf_run):
    """x-serve's model thread gets the JSON strings as parsed: a NUL or a lone surrogate ("\\ud800") is the
    input's error (400), never tokenized into a tag or an entity text the answer could not encode."""
    predictor = load_predictor(str(crf_run), cpu=True, threads=1)
    nul, surrogate, fine = predictor.predict_inputs(["北京\x00上海", "北\ud800京", "北京"])
    assert isinstance(nul, BadInput) and str(nul).startswith("a NUL character in the text at position 2: "), nul
    assert isinstance(surrogate, BadInput) and str(surrogate).startswith(
        "a lone surrogate (U+D800) in the text at position 1: "), surrogate
    assert len(fine["tags"]) == 2


def test_bert_ner_trains_and_predicts_spans(tmp_path):
    data_dir = prepro(tmp_path, processor="bert_ner", tokenizer="bert", vocab_file=CHINESE_VOCAB, data_files="dev.conll")
    config = train_config(tmp_path / "train.hjson", data_dir, tmp_path / "run", model="bert_ner",
                          embedding_dim=..., hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                          intermediate_size=64, max_position_embeddings=256, dropout=..., max_update=4,
                          eval_interval=2, batch_size=25, crf=False, pretrained_model=None, train_subset="dev")
    assert run_chain(["x-train", str(config)]) == 0
    rows = read_tsv(tmp_path / "run" / "valid.log.tsv")
    assert len(rows) == 2 and float(rows[-1]["token_accuracy"]) > 0
    out = tmp_path / "pred.tsv"
    texts = tmp_path / "texts.conll"
    texts.write_text("北\n京\n\n上\n海\n", encoding="utf-8")
    assert run_chain(["x-pred", str(write_json(tmp_path / "pred.hjson", {
        "save_dir": str(tmp_path / "run"), "predict_file_map": {str(texts): str(out)}}))]) == 0
    assert [row["text"] for row in read_tsv(out)] == ["北京", "上海"]



# export_onnx works too (its export form unrolls the LSTM), but takes a minute or more: not in the test run
@pytest.mark.parametrize("tool,name", [("export_torchscript", "model.pt")])
def test_lstm_ner_exports_with_parity(crf_run, tmp_path, capsys, tool, name):
    config = write_json(tmp_path / f"{tool}.hjson", {"save_dir": str(crf_run), "out_dir": str(tmp_path / tool)})
    assert x_script([tool, str(config)]) == 0
    assert (tmp_path / tool / name).exists()
    # the tool checks the export on real samples of the run's data, batched in several shapes
    assert "parity with the eager model" in capsys.readouterr().out
    # ... and so does this test, on the file as a user loads it, against the run's own model
    import torch

    from xdpx.export.loading import load_run
    from xdpx.export.parity import real_samples

    inputs = json.loads((tmp_path / tool / "export.json").read_text())["inputs"]
    scripted = torch.jit.load(str(tmp_path / tool / name))
    run = load_run(str(crf_run))
    samples = real_samples(run.args, 40)
    for chosen in (samples[-5:], samples[12:14], samples[:1]):
        batch = run.processor.collate(chosen)["net_input"]
        with torch.no_grad():
            expected, actual = run.model(**batch), scripted(*[batch[n] for n in inputs])
        assert actual.shape == expected.shape
        torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)
