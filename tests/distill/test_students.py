"""pretrained_layers: a shallower student built from its teacher's chosen layers (xdpx/models/students.py).

Our BERT: a 4-layer tiny teacher run, a 2-layer student of its layers [2, 4] distilled with loss tinybert,
resumed and evaluated; its layers equal the teacher's bitwise after the initialisation. The transformers
family: a 4-layer tiny BERT folder as a Hugging Face model, a student of its layers [1, 3]. Bad input: a
layer out of range, a repeated layer, a teacher of another encoder family: one line, exit 2, nothing written.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.distill.conftest import REPO, run, write_json
from xdpx.cli import run_chain
from xdpx.config.options import Args
from xdpx.config.writers import read_args
from xdpx.tasks import tasks

SAMPLES = REPO / "examples/data/sample"
BERT = {"model": "bert_classification", "intermediate_size": 64, "max_position_embeddings": 64,
        "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "batch_size": 16, "learning_rate": 1e-3,
        "major_metric": "accuracy", "eval_interval": 2, "lr_scheduler": "constant", "save_last_only": True}
TEACHER = {"hidden_size": 32, "num_hidden_layers": 4, "num_attention_heads": 4, "pretrained_model": None}


@pytest.fixture(scope="module")
def teacher(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("students")
    run("x-prepro", root / "prepro.hjson", {"__parent__": str(REPO / "examples/prepro/reviews_bert"),
                                            "__ignore__": ["threshold"], "data_source": str(SAMPLES / "reviews"),
                                            "data_dir": str(root / "data"), "workers": 1, "max_len": 32,
                                            "vocab_file": str(SAMPLES / "vocab/chinese_vocab.txt")})
    run("x-train", root / "teacher.hjson", {"__parent__": "${data_dir}/meta", "data_dir": str(root / "data"),
                                            **BERT, **TEACHER, "max_update": 2, "save_dir": str(root / "teacher"),
                                            "loss": "cross_entropy"})
    return {"root": root, "data": root / "data", "teacher": root / "teacher"}


def student(teacher: dict[str, Path], save_dir: Path, **overrides: object) -> dict[str, object]:
    return {"__parent__": "${data_dir}/meta", "data_dir": str(teacher["data"]), **BERT, "save_dir": str(save_dir),
            "task": "distill", "loss": "tinybert", "teacher": str(teacher["teacher"]), "alpha": 0.5,
            "pretrained_model": f"{teacher['teacher']}/<last>", "pretrained_layers": [2, 4], **overrides}


def initialised(run_dir: Path) -> torch.nn.Module:
    """The student as x-train starts it: built from its args.py, then pretrained_model loaded."""
    args = Args(read_args(str(run_dir / "args.py")), {}, set(), {})
    model = tasks.get(args.task)(args).build_model()
    model.load_pretrained(args.pretrained_model, log=lambda _message: None)
    return model


def teacher_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    from xdpx.models.checkpoints import load_torch

    return load_torch(str(run_dir / "state.pt"))["model"]


def test_a_student_of_layers_2_and_4_trains_resumes_and_evaluates(teacher, tmp_path):
    save_dir = tmp_path / "student"
    config = write_json(tmp_path / "student.hjson", student(teacher, save_dir, max_update=4, train_steps=2))
    assert run_chain(["x-train", str(config)]) == 0
    args = read_args(str(save_dir / "args.py"))
    assert args["num_hidden_layers"] == 2 and args["hidden_size"] == 32  # depth from pretrained_layers, width kept
    log = (save_dir / "log.txt").read_text()
    assert "layers [2, 4] of its 4 as this model's 2" in log

    # the initialisation: embeddings, the two chosen layers and the classifier, bit for bit
    model, source = initialised(save_dir), teacher_weights(teacher["teacher"])
    own = model.state_dict()
    for theirs, ours in ((1, 0), (3, 1)):
        prefix = f"bert.encoder.layer.{theirs}."
        layer = {k[len(prefix):]: v for k, v in source.items() if k.startswith(prefix)}
        assert layer and all(torch.equal(v, own[f"bert.encoder.layer.{ours}.{k}"]) for k, v in layer.items())
    for key in ("bert.embeddings.word_embeddings.weight", "bert.embeddings.LayerNorm.weight", "classifier.weight",
                "bert.pooler.dense.weight"):
        assert torch.equal(own[key], source[key]), key
    key = "bert.encoder.layer.1.output.dense.weight"  # the teacher's layer 4, not its layer 2
    assert not torch.equal(own[key], source[key])

    # resumed: the saved state wins, the teacher's layers are not loaded again
    trained = teacher_weights(save_dir)
    resumed = write_json(tmp_path / "resume.hjson", student(teacher, save_dir, max_update=4, resume=True))
    assert run_chain(["x-train", str(resumed)]) == 0
    log = (save_dir / "log.txt").read_text()
    assert "resumed from state.pt: epoch 1, update 2" in log and log.count("as this model's 2") == 1
    from xdpx.models.checkpoints import load_torch

    assert load_torch(str(save_dir / "state.pt"))["counters"]["num_updates"] == 4
    assert any(not torch.equal(v, trained[k]) for k, v in teacher_weights(save_dir).items())

    # evaluated like any run of its model: no teacher needed
    out = tmp_path / "eval.tsv"
    evaluate = write_json(tmp_path / "eval.hjson", {"save_dir": str(save_dir), "valid_subset": "dev",
                                                     "save_to_file": str(out)})
    assert run_chain(["x-eval", str(evaluate)]) == 0
    header, row = out.read_text().splitlines()[:2]
    evaluated = dict(zip(header.split("\t"), row.split("\t")))
    logged = (save_dir / "valid.log.tsv").read_text().splitlines()
    last = dict(zip(logged[0].split("\t"), logged[-1].split("\t")))
    assert float(evaluated["accuracy"]) == pytest.approx(float(last["accuracy"]), abs=1e-6)


@pytest.mark.parametrize("layers, says", [
    ([2, 5], "pretrained_layers [2, 5]: layer 5 is out of range: pretrained_model"),
    ([0, 1], "key 'pretrained_layers': [0, 1]: must be a non-empty list of integers, each >= 1"),
    ([3, 3], "pretrained_layers [3, 3]: a layer is named twice"),
])
def test_a_layer_that_the_teacher_lacks_stops_before_any_work(teacher, tmp_path, capsys, layers, says):
    save_dir = tmp_path / "student"
    config = write_json(tmp_path / "bad.hjson", student(teacher, save_dir, pretrained_layers=layers))
    assert run_chain(["x-train", str(config)]) == 2
    err = capsys.readouterr().err
    assert says in err and ("4 layers, numbered 1..4" in err or "named twice" in err or ">= 1" in err)
    assert not save_dir.exists()


def test_a_teacher_of_another_encoder_family_stops_before_any_work(teacher, tmp_path, capsys):
    save_dir = tmp_path / "student"
    config = {**student(teacher, save_dir), "model": "hf_classification", "loss": "distill"}
    for key in ("intermediate_size", "max_position_embeddings", "hidden_dropout_prob", "attention_probs_dropout_prob"):
        del config[key]  # our BERT's options, not a transformers encoder's
    config = write_json(tmp_path / "bad.hjson", config)
    assert run_chain(["x-train", str(config), "--dry"]) == 2
    err = capsys.readouterr().err
    assert "is a run of encoder bert (model bert_classification), this model's encoder is hf" in err
    assert not save_dir.exists()


def test_a_transformers_student_copies_the_chosen_layers_bitwise(tmp_path):
    transformers = pytest.importorskip("transformers")
    from tests.bert.bert_helpers import ROOT
    from xdpx.config.options import resolve
    from xdpx.models import models

    config = transformers.BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=4, num_attention_heads=2,
                                     intermediate_size=48, max_position_embeddings=64)
    torch.manual_seed(0)
    transformers.BertModel(config).save_pretrained(tmp_path / "tiny_bert")
    args = resolve({"model": "hf_classification", "pretrained_model": str(tmp_path / "tiny_bert"),
                    "pretrained_layers": [1, 3], "learning_rate": 1e-3, "num_classes": 2}, ROOT, "test")
    assert args.hf_config["num_hidden_layers"] == 2
    model = models.get(args.model).build(args)
    model.load_pretrained(args.pretrained_model, log=lambda _message: None)
    source = transformers.BertModel.from_pretrained(tmp_path / "tiny_bert").state_dict()
    own = model.state_dict()
    for theirs, ours in ((0, 0), (2, 1)):
        layer = {k: v for k, v in source.items() if k.startswith(f"encoder.layer.{theirs}.")}
        assert layer
        for key, value in layer.items():
            assert torch.equal(value, own["encoder." + key.replace(f"layer.{theirs}.", f"layer.{ours}.")]), key
    assert torch.equal(own["encoder.embeddings.word_embeddings.weight"], source["embeddings.word_embeddings.weight"])

    from xdpx.config.errors import ConfigError

    with pytest.raises(ConfigError, match="layer 7 is out of range: pretrained_model .* has 4 layers"):
        resolve({"model": "hf_classification", "pretrained_model": str(tmp_path / "tiny_bert"),
                 "pretrained_layers": [1, 7], "learning_rate": 1e-3, "num_classes": 2}, ROOT, "test")


def test_a_distilled_student_quantizes_and_its_int8_folder_evaluates(teacher, tmp_path):
    """x-script quantize scores a student with its own loss (tinybert) on an int8 model that has no
    training flag; the int8 folder is evaluated by x-eval like any run."""
    quantize = pytest.importorskip("xdpx.export.quantize")
    save_dir = tmp_path / "student"
    assert run_chain(["x-train", str(write_json(tmp_path / "s.hjson", student(teacher, save_dir, max_update=2)))]) == 0
    report = quantize.quantize_run(str(save_dir), str(tmp_path / "int8"), checkpoint="<last>", split="dev",
                                   tolerance=100, onnx=False, say=lambda _message: None)
    assert report["major_metric"] == "accuracy" and "int8_torch" in report
    out = tmp_path / "eval.tsv"
    evaluate = write_json(tmp_path / "eval.hjson", {"save_dir": str(tmp_path / "int8"), "valid_subset": "dev",
                                                     "save_to_file": str(out)})
    assert run_chain(["x-eval", str(evaluate)]) == 0
    header, row = out.read_text().splitlines()[:2]
    evaluated = dict(zip(header.split("\t"), row.split("\t")))
    assert float(evaluated["accuracy"]) == pytest.approx(report["int8_torch"]["accuracy"], abs=1e-6)
