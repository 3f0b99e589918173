"""The BERT models against transformers: same keys, same outputs; padding, towers, options."""

from __future__ import annotations

import pytest
import torch

from tests.bert.bert_helpers import batch, bert_args, build, hf_twin
from xdpx.config.errors import ConfigError
from xdpx.config.options import resolve

pytest.importorskip("transformers")


@pytest.mark.parametrize(("model", "hf_class", "config"), [
    ("bert_classification", "BertForSequenceClassification", {"num_classes": 3}),
    ("bert_pair", "BertForSequenceClassification", {"num_classes": 2}),
    ("bert_pair", "BertForSequenceClassification",
     {"target_type": "regression", "num_classes": 1, "loss": "mse", "major_metric": "pearson"}),
])
def test_classifiers_equal_transformers(model, hf_class, config):
    ours = build(model=model, **config).eval()
    twin = hf_twin(ours, hf_class)
    assert set(ours.state_dict()) == set(twin.state_dict())
    inputs = batch()
    with torch.no_grad():
        expected = twin(**inputs).logits
        got = ours(**inputs)
    assert got.shape == (expected.shape if expected.size(-1) > 1 else expected.shape[:1])
    torch.testing.assert_close(got, expected.squeeze(-1) if expected.size(-1) == 1 else expected,
                               atol=1e-5, rtol=1e-5)


def test_masked_lm_equals_transformers_and_ties_the_decoder():
    ours = build(model="bert_lm", loss="mlm", major_metric="mlm_accuracy").eval()
    twin = hf_twin(ours, "BertForMaskedLM")
    assert set(ours.state_dict()) == set(twin.state_dict())
    assert ours.cls.predictions.decoder.weight is ours.bert.embeddings.word_embeddings.weight
    inputs = batch()
    with torch.no_grad():
        expected = twin(**inputs).logits
        full = ours(**inputs)
        at = inputs["attention_mask"].bool() & (inputs["input_ids"] > 4)
        some = ours(**inputs, masked_positions=at)
    mask = inputs["attention_mask"].bool()
    torch.testing.assert_close(full[mask], expected[mask], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(some, expected[at], atol=1e-5, rtol=1e-5)


def test_pretraining_model_equals_transformers():
    ours = build(model="bert_pretrain", loss="mlm_sop", major_metric="mlm_accuracy").eval()
    twin = hf_twin(ours, "BertForPreTraining")
    assert set(ours.state_dict()) == set(twin.state_dict())
    inputs = batch()
    with torch.no_grad():
        expected = twin(**inputs)
        mlm, sop = ours(**inputs)
    mask = inputs["attention_mask"].bool()
    torch.testing.assert_close(mlm[mask], expected.prediction_logits[mask], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(sop, expected.seq_relationship_logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("model", ["bert_classification", "bert_siamese", "bert_lm"])
def test_padding_does_not_change_outputs(model):
    """A sample alone and the same sample padded in a batch give the same outputs."""
    extra = {"loss": "mlm", "major_metric": "mlm_accuracy"} if model == "bert_lm" else {"pooling": "mean"}
    ours = build(model=model, **extra).eval()
    inputs = batch(lengths=(12, 5, 7))
    with torch.no_grad():
        together = ours(**inputs)
        for row, n in enumerate((12, 5, 7)):
            alone = ours(**{k: v[row: row + 1, :n] for k, v in inputs.items()})
            expected = together[row: row + 1, :n] if model == "bert_lm" else together[row: row + 1]
            torch.testing.assert_close(alone, expected, atol=1e-5, rtol=1e-5)


def test_siamese_encodes_each_text_alone():
    """Tower a is [CLS] a [SEP], tower b is [CLS] b [SEP]: the same as encoding them one by one."""
    ours = build(model="bert_siamese", num_classes=2).eval()
    inputs = batch(lengths=(9, 12))
    with torch.no_grad():
        logits = ours(**inputs)
        vectors = []
        for row, n in enumerate((9, 12)):
            ids = inputs["input_ids"][row, :n]
            half = max(n // 2, 1)
            a, b = ids[: half + 1], torch.cat((ids[:1], ids[half + 1:]))
            for text in (a, b):
                hidden, _ = ours.bert(text[None], torch.zeros_like(text)[None], torch.ones_like(text)[None])
                vectors.append(hidden.mean(1))
        u, v = torch.cat(vectors[0::2]), torch.cat(vectors[1::2])
        expected = ours.classifier(torch.cat((u, v, (u - v).abs(), u * v), -1))
    torch.testing.assert_close(logits, expected, atol=1e-5, rtol=1e-5)


def test_bert_requires_pretrained_model_or_explicit_null():
    from tests.bert.bert_helpers import ROOT, TINY

    with pytest.raises(ConfigError, match="pretrained_model: null"):
        resolve({"model": "bert_classification", **TINY}, ROOT, "test")
    assert bert_args(pretrained_model=None).pretrained_model is None


def test_hf_config_of_a_classifier_names_labels(tmp_path):
    (tmp_path / "target_map.txt").write_text("neg\npos\n")
    config = build(num_classes=2, data_dir=str(tmp_path)).hf_config()
    assert config["architectures"] == ["BertForSequenceClassification"]
    assert config["id2label"] == {"0": "neg", "1": "pos"} and config["num_labels"] == 2
    assert config["hidden_size"] == 32 and config["vocab_size"] == 120


def test_layer_lr_decay_and_head_multiplier_make_parameter_groups():
    from xdpx.optim import lr_schedulers, optimizers

    args = bert_args(layer_lr_decay=0.5, head_lr_multiplier=10.0, learning_rate=1e-3)
    torch.manual_seed(0)
    from xdpx.models import models

    model = models.get("bert_classification").build(args)
    optimizer = optimizers.get("adam").build(args, model)
    lr_schedulers.get("constant")(args, 10).step_update(optimizer, 0)
    lr_of = {id(p): g["lr"] for g in optimizer.param_groups for p in g["params"]}
    params = dict(model.named_parameters())
    assert lr_of[id(params["classifier.weight"])] == pytest.approx(1e-2)
    assert lr_of[id(params["bert.encoder.layer.1.output.dense.weight"])] == pytest.approx(1e-3 * 0.5)
    assert lr_of[id(params["bert.encoder.layer.0.output.dense.weight"])] == pytest.approx(1e-3 * 0.25)
    assert lr_of[id(params["bert.embeddings.word_embeddings.weight"])] == pytest.approx(1e-3 * 0.125)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(1e-3)  # the full-lr groups first (pooler)


def test_freeze_embeddings():
    model = build(freeze_embeddings=True)
    assert not any(p.requires_grad for p in model.bert.embeddings.parameters())
    assert all(p.requires_grad for p in model.bert.encoder.parameters())
