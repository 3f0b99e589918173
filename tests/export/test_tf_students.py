"""export_tf of the non-transformer models (cls_cnn, cls_lstm, match_cnn, re2): parity with PyTorch,
``init_tables`` (raw text in, the run's tokenization inside the SavedModel) against x-pred, and ``from_tf``
in x-eval / x-pred reading the SavedModel back."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from export_helpers import eager_and_batches, export

from tests.export.conftest import REPO
from xdpx.cli import run_chain

pytestmark = pytest.mark.tf
SAMPLES = REPO / "examples/data/sample"


@pytest.fixture
def tf():
    return pytest.importorskip("tensorflow")


def read_tsv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def x_pred(tmp_path: Path, save_dir: Path, source: Path, name: str, **options) -> list[dict[str, str]]:
    out = tmp_path / f"{name}.tsv"
    config = tmp_path / f"{name}.hjson"
    config.write_text(json.dumps({"save_dir": str(save_dir), "predict_file_map": {str(source): str(out)},
                                  "cuda": False, **options}))
    assert run_chain(["x-pred", str(config)]) == 0
    return read_tsv(out)


@pytest.fixture(scope="module")
def savedmodel(trained, tmp_path_factory):
    """``savedmodel(model) -> out_dir`` of export_tf (token ids in) of the tiny run of that model, once."""
    written: dict[str, Path] = {}

    def get(model: str) -> Path:
        if model not in written:
            code, written[model] = export("export_tf", tmp_path_factory.mktemp(model), trained(model))
            assert code == 0
        return written[model]

    return get


@pytest.mark.parametrize("model", ["cls_cnn", "cls_lstm", "match_cnn"])  # re2: in the init_tables test
def test_savedmodel_of_a_student_equals_the_run_within_1e_5(model, tf, trained, savedmodel):
    out_dir = savedmodel(model)
    info = json.loads((out_dir / "export.json").read_text())
    assert info["parity"].startswith("max |difference|") and not info["init_tables"]
    assert float(info["parity"].split()[2]) <= 1e-5
    serving = tf.saved_model.load(str(out_dir)).signatures["serving_default"]
    names = ["tokens"] if model.startswith("cls_") else ["tokens1", "tokens2"]
    assert info["inputs"] == names and sorted(serving.structured_input_signature[1]) == names
    run, batches = eager_and_batches(trained(model))
    for batch in batches:  # shapes the export's own check did not use
        out = serving(**{n: tf.constant(batch[n].numpy()) for n in names})["logits"].numpy()
        with torch.no_grad():
            want = run.model(**batch).numpy()
        assert out.shape == want.shape
        assert np.max(np.abs(out - want)) <= 1e-5


def test_init_tables_savedmodel_takes_raw_chinese_text_as_x_pred_does(tf, trained, tmp_path):
    save_dir = trained("cls_cnn")  # char_zh, max_len 64, vocabulary of the 240 training reviews
    code, out_dir = export("export_tf", tmp_path, save_dir, init_tables=True)
    assert code == 0
    info = json.loads((out_dir / "export.json").read_text())
    assert info["inputs"] == ["text"] and info["signatures"]["serving_default_ids"] == ["tokens"]
    assert "raw texts as x-pred" in info["parity"]
    source = SAMPLES / "reviews/test.txt"
    texts = [line.split("\t")[0] for line in source.read_text(encoding="utf-8").splitlines()]
    rows = x_pred(tmp_path, save_dir, source, "reviews")
    # the file exercises what the tables must get right: unknown characters and texts over max_len
    run, _ = eager_and_batches(save_dir)
    encoded = [run.processor.encode(t)["tokens"] for t in texts]
    assert sum(int((e == run.processor.dictionary.unk_index).sum()) for e in encoded) > 20
    assert sum(len(run.processor.tokenizer.tokenize(t)) > 64 for t in texts) >= 5
    serving = tf.saved_model.load(str(out_dir)).signatures["serving_default"]
    out = serving(text=tf.constant(texts))  # one batch: short texts padded to the longest
    labels = run.processor.target_map.labels
    expected = np.array([[float(r[f"prob_{label}"]) for label in labels] for r in rows])
    assert np.max(np.abs(out["probabilities"].numpy() - expected)) <= 1e-5
    assert [s.decode() for s in out["label"].numpy()] == [r["predict"] for r in rows]
    alone = serving(text=tf.constant(texts[:1]))["probabilities"].numpy()  # no padding at all
    assert np.max(np.abs(alone - expected[:1])) <= 1e-5


def test_init_tables_savedmodel_takes_raw_english_pairs_as_x_pred_does(tf, trained, tmp_path):
    save_dir = trained("re2")  # space tokenizer with lower, STS-B pairs, regression
    code, out_dir = export("export_tf", tmp_path, save_dir, init_tables=True, fix_len=True,
                           signature_def_key="predict")
    assert code == 0
    info = json.loads((out_dir / "export.json").read_text())
    assert info["inputs"] == ["text1", "text2"] and info["fix_len"] == 64
    assert float(info["parity"].split()[2]) <= 1e-5  # the ids signature against the run's model
    source = SAMPLES / "stsb/test.tsv"
    records = [line.split("\t") for line in source.read_text(encoding="utf-8").splitlines()]
    assert any(any(c.isupper() for c in r[5]) for r in records)  # lowercasing is the SavedModel's job too
    rows = x_pred(tmp_path, save_dir, source, "stsb")
    serving = tf.saved_model.load(str(out_dir)).signatures["predict"]
    out = serving(text1=tf.constant([r[5] for r in records]), text2=tf.constant([r[6] for r in records]))
    expected = np.array([float(r["score"]) for r in rows])
    assert np.max(np.abs(out["score"].numpy() - expected)) <= 1e-5


def test_from_tf_evaluates_and_predicts_as_the_run(trained, savedmodel, tf, tmp_path, capsys):
    save_dir, out_dir = trained("cls_cnn"), savedmodel("cls_cnn")
    lines = {}
    for name, extra in (("run", {}), ("from_tf", {"from_tf": True, "checkpoint": str(out_dir)})):
        config = tmp_path / f"eval_{name}.hjson"
        config.write_text(json.dumps({"save_dir": str(save_dir), "valid_subset": ["dev", "test"], "cuda": False,
                                      **extra}))
        capsys.readouterr()
        assert run_chain(["x-eval", str(config)]) == 0
        lines[name] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("x-eval ")]
    # per split its reliability bins and its metrics: the same four lines from the SavedModel's weights
    assert len(lines["run"]) == 4 and sum(" reliability " in line for line in lines["run"]) == 2
    assert lines["from_tf"] == lines["run"]
    source = SAMPLES / "reviews/dev.txt"
    pytorch = x_pred(tmp_path, save_dir, source, "pred_run")
    assert x_pred(tmp_path, save_dir, source, "pred_tf", from_tf=True, checkpoint=str(out_dir)) == pytorch


def test_from_tf_refuses_a_savedmodel_of_another_model_and_a_missing_checkpoint(trained, savedmodel, tf, tmp_path,
                                                                                 capsys):
    other = savedmodel("cls_lstm")  # same data, another model
    config = tmp_path / "eval.hjson"
    config.write_text(json.dumps({"save_dir": str(trained("cls_cnn")), "valid_subset": "dev", "cuda": False,
                                  "from_tf": True, "checkpoint": str(other)}))
    assert run_chain(["x-eval", str(config)]) == 1
    assert "does not hold the weights of model cls_cnn: missing ['encoder.convs.0.weight'" in capsys.readouterr().err
    config.write_text(json.dumps({"save_dir": str(trained("cls_cnn")), "valid_subset": "dev", "from_tf": True}))
    assert run_chain(["x-eval", str(config), "--dry"]) != 0
    assert "from_tf: true reads the weights of checkpoint: set checkpoint" in capsys.readouterr().err


def test_init_tables_refuses_a_tokenizer_without_a_tf_form(trained, tf, tmp_path, capsys):
    from xdpx.export.tf_text import check_text_tokenizer

    # the cls_cnn run as if x-prepro had used jieba (a real jieba run costs seconds of dictionary loading;
    # the refusal reads only the run's tokenizer)
    jieba_run = tmp_path / "jieba_run"
    shutil.copytree(trained("cls_cnn"), jieba_run)
    args = (jieba_run / "args.py").read_text()
    assert "'tokenizer': 'char_zh'" in args
    (jieba_run / "args.py").write_text(args.replace("'tokenizer': 'char_zh'", "'tokenizer': 'jieba'"))
    code, out_dir = export("export_tf", tmp_path, jieba_run, init_tables=True)
    assert code == 1
    err = capsys.readouterr().err
    assert "tokenizer 'jieba' has none here (supported: space, char_zh): set init_tables: false" in err
    assert not (out_dir / "saved_model.pb").exists()
    for name in ("bert", "auto"):
        with pytest.raises(Exception, match=f"tokenizer '{name}' has none here"):
            check_text_tokenizer(SimpleNamespace(tokenizer=name))


def test_export_tf_names_the_models_it_supports(trained, tf, tmp_path, capsys):
    from xdpx.export.tf_savedmodel import inputs_of

    code, _ = export("export_tf", tmp_path, trained("cls_cnn"), export_format="checkpoint")
    assert code == 1
    assert "checkpoint writes Google BERT's variable names, which model 'cls_cnn' has not" in capsys.readouterr().err
    with pytest.raises(Exception, match="'bert_siamese' cannot be written as a TF SavedModel .*cls_cnn, cls_lstm, "
                                        "match_cnn, re2"):
        inputs_of("bert_siamese")
