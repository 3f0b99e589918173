"""Exports of tiny trained BERT runs: TorchScript, ONNX (dynamic axes) and the Hugging Face directory,
each compared with the run's own model on real samples of shapes the export did not see."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from export_helpers import eager_and_batches, export

BERT_INPUTS = ["input_ids", "token_type_ids", "attention_mask"]


@pytest.mark.parametrize("model", ["bert_classification", "bert_siamese"])
def test_bert_torchscript_and_onnx_match_the_run_at_other_shapes(model, bert_trained, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    save_dir = bert_trained(model)
    code, ts_dir = export("export_torchscript", tmp_path, save_dir)
    assert code == 0
    code, onnx_dir = export("export_onnx", tmp_path, save_dir)
    assert code == 0
    run, batches = eager_and_batches(save_dir)
    assert list(batches[0]) == BERT_INPUTS
    assert json.loads((onnx_dir / "export.json").read_text())["inputs"] == BERT_INPUTS
    scripted = torch.jit.load(str(ts_dir / "model.pt"))
    session = ort.InferenceSession(str(onnx_dir / "model.onnx"))
    dims = {i.name: i.shape for i in session.get_inputs()}
    if model == "bert_siamese":  # its ids reach only a gather: torch.export keeps their length a separate axis
        assert all(shape[0] == "batch" and shape[1].startswith("sequence") for shape in dims.values())
    else:
        assert dims == {name: ["batch", "sequence"] for name in BERT_INPUTS}
    unpadded = {k: v[:1, : int(batches[0]["attention_mask"][0].sum())] for k, v in batches[0].items()}
    for batch in [*batches, unpadded]:  # also a batch with no padding at all (BERT's fast path in eager)
        with torch.no_grad():
            expected = run.model(**batch)
            traced = scripted(*[batch[n] for n in BERT_INPUTS])
        onnx_out = session.run(None, {n: batch[n].numpy() for n in BERT_INPUTS})
        if model != "bert_pretrain":  # one output; bert_pretrain gives (mlm_logits, sop_logits)
            expected, traced = (expected,), (traced,)
        assert len(onnx_out) == len(expected) == len(traced)
        for want, got_traced, got_onnx in zip(expected, traced, onnx_out):
            assert want.shape == got_traced.shape == got_onnx.shape
            torch.testing.assert_close(got_traced, want, atol=1e-5, rtol=1e-5)
            np.testing.assert_allclose(got_onnx, want.numpy(), atol=1e-5, rtol=1e-4)
    if model == "bert_pretrain":
        assert [o.name for o in session.get_outputs()] == ["mlm_logits", "sop_logits"]


@pytest.mark.parametrize("model, architecture", [("bert_classification", "BertForSequenceClassification"),
                                                 ("bert_pair", "BertForSequenceClassification"),
                                                 ("bert_lm", "BertForMaskedLM")])
def test_export_hf_loads_in_transformers_and_gives_our_outputs(model, architecture, bert_trained, tmp_path):
    transformers = pytest.importorskip("transformers")
    save_dir = bert_trained(model)
    code, out_dir = export("export_hf", tmp_path, save_dir)
    assert code == 0
    config = json.loads((out_dir / "config.json").read_text())
    assert config["architectures"] == [architecture]
    hf = transformers.AutoModel.from_config(transformers.AutoConfig.from_pretrained(out_dir))  # config is valid
    assert type(hf).__name__ == "BertModel"
    hf = getattr(transformers, architecture).from_pretrained(out_dir).eval()
    run, batches = eager_and_batches(save_dir)
    if model == "bert_classification":
        assert config["id2label"] == {"0": run.processor.target_map.labels[0], "1": run.processor.target_map.labels[1]}
    if model == "bert_pair":
        assert config["num_labels"] == 1 and config["problem_type"] == "regression"
    for batch in batches:
        with torch.no_grad():
            expected = run.model(**batch)
            logits = hf(**batch).logits
        torch.testing.assert_close(logits.squeeze(-1) if model == "bert_pair" else logits, expected,
                                   atol=1e-5, rtol=1e-4)
    # the tokenizer files make the run's tokenization: same ids as the run's processor on a real text
    tokenizer = transformers.BertTokenizerFast.from_pretrained(out_dir)
    text = "这家酒店的服务很好, room 很干净" if model != "bert_pair" else "a man is playing a flute."
    ours = run.processor.encode([text] * run.processor.num_texts)["input_ids"].tolist()
    theirs = tokenizer(*([text] * run.processor.num_texts))["input_ids"]
    assert theirs == ours


def test_export_hf_refuses_a_model_transformers_cannot_load(trained, tmp_path, capsys):
    code, out_dir = export("export_hf", tmp_path, trained("cls_cnn"))
    assert code == 1
    assert "model cls_cnn has no transformers class" in capsys.readouterr().err
    assert not (out_dir / "model.safetensors").exists()
