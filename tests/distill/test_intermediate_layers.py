"""loss tinybert: a 2-layer BERT student of width 32 learns from a 4-layer teacher of width 48 through the
learned projection; matching a teacher with itself leaves only the hard-label part."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.distill.conftest import REPO, run, write_json
from xdpx.cli import run_chain
from xdpx.config.options import Args
from xdpx.config.writers import read_args
from xdpx.data import processors
from xdpx.data.dataset import open_split
from xdpx.tasks import tasks

SAMPLES = REPO / "examples/data/sample"
BERT = {"model": "bert_classification", "pretrained_model": None, "intermediate_size": 64,
        "max_position_embeddings": 64, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
        "batch_size": 16, "learning_rate": 1e-3, "major_metric": "accuracy", "max_update": 6, "eval_interval": 6,
        "lr_scheduler": "constant", "save_last_only": True}
TEACHER = {"hidden_size": 48, "num_hidden_layers": 4, "num_attention_heads": 4}
STUDENT = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2}


@pytest.fixture(scope="module")
def bert_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tinybert")
    run("x-prepro", root / "prepro.hjson", {"__parent__": str(REPO / "examples/prepro/reviews_bert"),
                                            "__ignore__": ["threshold"], "data_source": str(SAMPLES / "reviews"),
                                            "data_dir": str(root / "data"), "workers": 1, "max_len": 32,
                                            "vocab_file": str(SAMPLES / "vocab/chinese_vocab.txt")})
    base = {"__parent__": "${data_dir}/meta", "data_dir": str(root / "data"), **BERT}
    run("x-train", root / "teacher.hjson", {**base, **TEACHER, "save_dir": str(root / "teacher"),
                                            "loss": "cross_entropy"})
    run("x-train", root / "student.hjson", {**base, **STUDENT, "save_dir": str(root / "student"), "task": "distill",
                                            "loss": "tinybert", "teacher": str(root / "teacher"), "alpha": 0.5})
    return {"data": root / "data", "teacher": root / "teacher", "student": root / "student"}


def task_and_batch(run_dir: Path, data: Path, **changes: object):
    args = Args({**read_args(str(run_dir / "args.py")), **changes}, {}, set(), {})
    task = tasks.get("distill")(args)
    split = open_split(str(data), "train")
    batch = processors.get(args.processor)(args).collate([split[i] for i in range(12)])
    return task, batch


def test_student_of_another_width_trains_its_projection(bert_runs):
    from xdpx.models.checkpoints import load_torch

    weights = load_torch(str(bert_runs["student"] / "state.pt"))["model"]
    assert weights["distill_projection.dense.weight"].shape == (48, 32)
    task, batch = task_and_batch(bert_runs["student"], bert_runs["data"])
    model = task.build_model()
    model.load_state_dict(weights)
    model.train()
    loss, sample_size, _ = task.train_step(model, batch)
    loss.backward()
    assert sample_size == 12
    assert model.distill_projection.dense.weight.grad.abs().sum() > 0
    # the layer terms add to the logit loss, each of them
    plain, _, _ = tasks.get("distill")(Args({**dict(task.args.items()), "hidden_weight": 0.0,
                                              "attention_weight": 0.0}, {}, set(), {})).train_step(model, batch)
    only_hidden, _, _ = tasks.get("distill")(Args({**dict(task.args.items()), "attention_weight": 0.0},
                                                  {}, set(), {})).train_step(model, batch)
    assert plain.item() < only_hidden.item() < loss.item()


def test_a_teacher_matched_with_itself_leaves_the_hard_label_part(bert_runs, tmp_path):
    teacher_args = read_args(str(bert_runs["teacher"] / "args.py"))
    task, batch = task_and_batch(bert_runs["student"], bert_runs["data"], **{k: teacher_args[k] for k in TEACHER})
    model = task.build_model()
    assert not hasattr(model, "distill_projection")  # same width: nothing to learn there
    from xdpx.models.checkpoints import load_torch

    model.load_state_dict(load_torch(str(bert_runs["teacher"] / "state.pt"))["model"])
    model.train()  # dropout is 0: the same numbers as the teacher's eval mode
    loss, _, _ = task.train_step(model, batch)
    logits = model(**batch["net_input"])
    hard = torch.nn.functional.cross_entropy(logits, batch["target"], reduction="sum")
    assert loss.item() == pytest.approx(0.5 * hard.item(), rel=1e-5)


def test_tinybert_needs_an_online_teacher(bert_runs, tmp_path, capsys):
    config = write_json(tmp_path / "bad.hjson", {"__parent__": "${data_dir}/meta", "data_dir": str(bert_runs["data"]),
                                                 "save_dir": str(tmp_path / "x"), **BERT, **STUDENT,
                                                 "task": "distill", "loss": "tinybert"})
    assert run_chain(["x-train", str(config), "--dry"]) == 2
    assert "loss tinybert matches the teacher's hidden states" in capsys.readouterr().err


def test_a_teacher_that_is_not_a_run_stops_before_any_work(bert_runs, tmp_path, capsys):
    config = write_json(tmp_path / "bad.hjson", {"__parent__": "${data_dir}/meta", "data_dir": str(bert_runs["data"]),
                                                 "save_dir": str(tmp_path / "x"), **BERT, **STUDENT,
                                                 "task": "distill", "loss": "distill",
                                                 "teacher": str(tmp_path / "nowhere")})
    assert run_chain(["x-train", str(config), "--dry"]) == 2
    assert "teacher must be an x-train run directory" in capsys.readouterr().err
