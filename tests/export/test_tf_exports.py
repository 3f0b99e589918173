"""TensorFlow both ways for BERT runs: export_tf (SavedModel, Google-named checkpoint), export_pt, and
``from_tf: true`` loading a checkpoint that TensorFlow's own Saver wrote."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from export_helpers import eager_and_batches, export
from tf_helpers import google_bert_variables, save_with_tf_saver

from xdpx.cli import x_script

pytestmark = pytest.mark.tf
INPUTS = ["input_ids", "token_type_ids", "attention_mask"]


@pytest.fixture
def tf():
    return pytest.importorskip("tensorflow")


def fresh_model(run, from_tf: bool):
    """A new model of the run's architecture, randomly initialised, ready for load_pretrained."""
    run.args.from_tf = from_tf
    torch.manual_seed(123)
    return run.task.build_model().eval()


@pytest.mark.parametrize("fix_len", [False, True])
def test_export_tf_savedmodel_matches_the_run(fix_len, tf, bert_trained, tmp_path):
    save_dir = bert_trained("bert_classification")
    code, out_dir = export("export_tf", tmp_path, save_dir, check_outputs=True, fix_len=fix_len,
                           signature_def_key="predict")
    assert code == 0
    info = json.loads((out_dir / "export.json").read_text())
    assert info["parity"].startswith("max |difference|") and info["fix_len"] == (48 if fix_len else None)
    serving = tf.saved_model.load(str(out_dir)).signatures["predict"]
    assert [s.shape.as_list() for s in serving.structured_input_signature[1].values()] == [[None, 48 if fix_len else None]] * 3
    run, batches = eager_and_batches(save_dir)
    for batch in batches:
        if fix_len:
            batch = {k: torch.nn.functional.pad(v, (0, 48 - v.size(1)), value=0) for k, v in batch.items()}
        out = serving(**{n: tf.constant(batch[n].numpy()) for n in INPUTS})["logits"].numpy()
        with torch.no_grad():
            np.testing.assert_allclose(out, run.model(**batch).numpy(), atol=1e-4, rtol=1e-4)
    if not fix_len:  # from_tf also reads a SavedModel that export_tf wrote: the very same weights
        model = fresh_model(run, from_tf=True)
        model.load_pretrained(str(out_dir), log=lambda _: None)
        with torch.no_grad():
            for batch in batches:
                torch.testing.assert_close(model(**batch), run.model(**batch), atol=0, rtol=0)


def test_export_tf_checkpoint_then_from_tf_and_export_pt_give_the_same_model(tf, bert_trained, tmp_path):
    save_dir = bert_trained("bert_classification")
    code, out_dir = export("export_tf", tmp_path, save_dir, export_format="checkpoint")
    assert code == 0
    assert {"bert_model.ckpt.index", "bert_config.json", "vocab.txt", "checkpoint"} <= {p.name for p in out_dir.iterdir()}
    assert json.loads((out_dir / "bert_config.json").read_text())["hidden_size"] == 16
    run, batches = eager_and_batches(save_dir)
    with torch.no_grad():
        expected = [run.model(**b) for b in batches]

    from_tf = fresh_model(run, from_tf=True)
    from_tf.load_pretrained(str(out_dir / "bert_model.ckpt"), log=lambda _: None)
    with torch.no_grad():
        for batch, want in zip(batches, expected):
            torch.testing.assert_close(from_tf(**batch), want, atol=0, rtol=0)

    config = tmp_path / "export_pt.hjson"
    config.write_text(json.dumps({"tf_ckpt_path": str(out_dir), "tf_config": str(out_dir / "bert_config.json"),
                                  "out_dir": str(tmp_path / "pt"), "num_classes": 2}))
    assert x_script(["export_pt", str(config)]) == 0
    assert json.loads((tmp_path / "pt/config.json").read_text())["architectures"] == ["BertForSequenceClassification"]
    assert (tmp_path / "pt/vocab.txt").read_text() == (save_dir / "vocab.txt").read_text()
    converted = fresh_model(run, from_tf=False)
    converted.load_pretrained(str(tmp_path / "pt"), log=lambda _: None)
    with torch.no_grad():
        for batch, want in zip(batches, expected):
            torch.testing.assert_close(converted(**batch), want, atol=0, rtol=0)


def test_from_tf_reads_a_checkpoint_written_by_tf_saver(tf, bert_trained, tmp_path):
    """Google-named variables saved by tf.compat.v1 Saver (with Adam slots) -> our model == TF's computation."""
    from xdpx.export.tf_savedmodel import build_tf_bert

    run, batches = eager_and_batches(bert_trained("bert_classification"))
    variables = google_bert_variables(vocab_size=run.args.vocab_size, num_labels=2, seed=7)
    prefix = save_with_tf_saver(variables, tmp_path)
    logs: list[str] = []
    model = fresh_model(run, from_tf=True)
    model.load_pretrained(str(prefix), log=logs.append)
    assert "no missing keys" in logs[0]
    tf_model = build_tf_bert(variables, run.model.hf_config(), "classification", google_names=True)
    with torch.no_grad():
        for batch in batches:
            want = tf_model.serve(*[tf.constant(batch[n].numpy()) for n in INPUTS])["logits"].numpy()
            np.testing.assert_allclose(model(**batch).numpy(), want, atol=1e-5, rtol=1e-4)


def test_export_pt_rejects_a_wrong_num_classes(tf, tmp_path, capsys):
    prefix = save_with_tf_saver(google_bert_variables(vocab_size=40, num_labels=3), tmp_path)
    (tmp_path / "bert_config.json").write_text(json.dumps({"hidden_size": 16, "num_hidden_layers": 2,
                                                           "num_attention_heads": 2, "intermediate_size": 32,
                                                           "vocab_size": 40, "hidden_act": "gelu"}))
    config = tmp_path / "export_pt.hjson"
    config.write_text(json.dumps({"tf_ckpt_path": str(prefix), "tf_config": str(tmp_path / "bert_config.json"),
                                  "out_dir": str(tmp_path / "pt"), "num_classes": 2}))
    assert x_script(["export_pt", str(config)]) == 1
    assert "num_classes: 2, but the classifier of" in capsys.readouterr().err
