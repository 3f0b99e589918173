"""An online teacher that cannot serve the student stops x-train before any work (exit 2, --dry too, the
key and what differs named, no save_dir written), so the same command with the teacher fixed then runs:
a checkpoint missing from the teacher run, a cut checkpoint, an x-prepro data_dir given as the teacher, a
teacher of another vocabulary, a multi-label and an NER teacher for a classifier."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.distill.conftest import CNN, POLARITY, run, student_config
from tests.ner.ner_helpers import prepro as ner_prepro
from tests.ner.ner_helpers import train_config as ner_train_config
from xdpx.cli import run_chain

WORDS = {"parser": "csv", "loader": "single", "text_column": 1, "label_column": 0, "tokenizer": "space", "workers": 1}


def refused(config: Path, save_dir: Path, capsys) -> str:
    """The error line of x-train --dry and of x-train, checked to be the same, exit 2 and nothing written."""
    lines = []
    for dry in (["--dry"], []):
        assert run_chain(["x-train", str(config), *dry]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and not save_dir.exists(), err
        lines.append(err.strip())
    assert lines[0] == lines[1]
    return lines[0]


def copied_teacher(distill_data, tmp_path: Path) -> tuple[Path, Path]:
    teacher = tmp_path / "teacher"
    shutil.copytree(distill_data["teacher"], teacher)
    return teacher, next(teacher.glob("checkpoint-*.pt"))


def test_a_checkpoint_missing_from_the_teacher_run_then_the_fixed_rerun(distill_data, tmp_path, capsys):
    teacher, checkpoint = copied_teacher(distill_data, tmp_path)
    kept = checkpoint.read_bytes()
    checkpoint.unlink()
    index = json.loads((teacher / "checkpoints.json").read_text())
    missing = ", ".join(sorted({index["best"], index["last"]}))  # save_last_only: <best>'s file was removed too
    assert checkpoint.name in missing
    config = student_config(tmp_path, distill_data["student_data"], tmp_path / "student", teacher=str(teacher))
    assert refused(config, tmp_path / "student", capsys) == (
        f"x-train: error: {config}: key 'teacher': {str(teacher)!r} lacks {missing}, the checkpoint(s) its "
        "checkpoints.json names for <best> / <last>, and holds no other: copy the teacher run whole, or give one of "
        "its checkpoint files")
    checkpoint.write_bytes(kept)  # the teacher fixed: the same command trains
    assert run_chain(["x-train", str(config)]) == 0
    assert (tmp_path / "student" / "checkpoints.json").exists()


def test_a_cut_teacher_checkpoint(distill_data, tmp_path, capsys):
    teacher, checkpoint = copied_teacher(distill_data, tmp_path)
    checkpoint.write_bytes(checkpoint.read_bytes()[: checkpoint.stat().st_size // 2])
    config = student_config(tmp_path, distill_data["student_data"], tmp_path / "student", teacher=str(teacher))
    assert refused(config, tmp_path / "student", capsys).startswith(
        f"x-train: error: {config}: key 'teacher': {checkpoint} is truncated or corrupt (")


def test_a_data_dir_given_as_the_teacher(distill_data, tmp_path, capsys):
    config = student_config(tmp_path, distill_data["student_data"], tmp_path / "student",
                            teacher=str(distill_data["teacher_data"]))
    assert refused(config, tmp_path / "student", capsys) == (
        f"x-train: error: {config}: key 'teacher': {str(distill_data['teacher_data'])!r} is a data directory of "
        "x-prepro (it holds meta.hjson), not an x-train run: give the teacher run's save_dir")


def test_a_teacher_of_another_vocabulary_names_the_vocabulary(distill_data, tmp_path, capsys):
    # the teacher's tokenizer and max_len, another threshold, no raw texts kept
    data = tmp_path / "data"
    run("x-prepro", tmp_path / "prepro.hjson", {**WORDS, "data_source": str(POLARITY), "data_dir": str(data),
                                               "processor": "single", "max_len": 48, "threshold": 3})
    config = student_config(tmp_path, data, tmp_path / "student", teacher=str(distill_data["teacher"]))
    vocab = distill_data["teacher"] / "vocab.txt"
    teacher_size = len(vocab.read_text().split("\n")) - 1
    student_size = len((data / "vocab.txt").read_text().split("\n")) - 1
    assert refused(config, tmp_path / "student", capsys) == (
        f"x-train: error: {config}: key 'teacher': the student's batches are not the teacher's input, as these "
        f"differ: the vocabulary (teacher {teacher_size} tokens in {vocab}, student {student_size} in "
        f"{data / 'vocab.txt'}: another threshold, nwords or data?); and the student's data keeps no raw texts for "
        "the teacher to encode itself. Preprocess the student's data with teacher_logits: true and keep_texts: "
        f"true, or with the teacher's vocabulary (vocab_file: {vocab})")


@pytest.mark.parametrize("kind", ["multilabel", "ner"])
def test_a_teacher_of_other_targets_names_the_label_set(kind, distill_data, tmp_path, capsys):
    if kind == "multilabel":  # the same names (pos, neg) as label sets: the logits are sigmoids per label
        data = tmp_path / "data"
        run("x-prepro", tmp_path / "prepro.hjson", {**WORDS, "data_source": str(POLARITY), "data_dir": str(data),
                                                   "processor": "single", "max_len": 48, "target_type": "multilabel"})
        run("x-train", tmp_path / "teacher.hjson", {
            "__parent__": "${data_dir}/meta", "data_dir": str(data), "save_dir": str(tmp_path / "teacher"), **CNN,
            "loss": "multilabel_bce", "major_metric": "micro_f1", "max_update": 2, "save_last_only": True})
        predicts = "label sets (multi-label)"
    else:
        config = ner_train_config(tmp_path / "teacher.hjson", ner_prepro(tmp_path), tmp_path / "teacher",
                                  max_update=2, eval_interval=2)
        assert run_chain(["x-train", str(config)]) == 0
        predicts = "tags per token (NER)"
    config = student_config(tmp_path, distill_data["student_data"], tmp_path / "student",
                            teacher=str(tmp_path / "teacher"))
    assert refused(config, tmp_path / "student", capsys) == (
        f"x-train: error: {config}: key 'teacher': the label set differs: teacher {str(tmp_path / 'teacher')!r} "
        f"predicts {predicts}, the student one class per sample: its logits cannot be the student's soft targets; "
        "distil from a teacher of the student's kind of targets")


def test_a_teacher_of_other_labels_names_both_target_maps(distill_data, tmp_path, capsys):
    # the student's classes in the other order: its logit 0 would be scored against the teacher's logit 1
    (tmp_path / "target_map.txt").write_text("1\n-1\n")
    data = tmp_path / "data"
    run("x-prepro", tmp_path / "prepro.hjson", {**WORDS, "data_source": str(POLARITY), "data_dir": str(data),
                                               "processor": "single", "max_len": 48,
                                               "target_map_file": str(tmp_path / "target_map.txt")})
    config = student_config(tmp_path, data, tmp_path / "student", teacher=str(distill_data["teacher"]))
    assert refused(config, tmp_path / "student", capsys) == (
        f"x-train: error: {config}: key 'teacher': the label set differs: teacher ['-1', '1'] "
        f"({distill_data['teacher'] / 'target_map.txt'}), student ['1', '-1'] ({data / 'target_map.txt'}): "
        "distillation needs the same labels in the same order; preprocess the student's data with "
        f"target_map_file: {distill_data['teacher'] / 'target_map.txt'}")
