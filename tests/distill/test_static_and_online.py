"""Static and online distillation end to end: x-pred logits -> x-prepro -> x-train read back exactly (single
texts and pairs); an online teacher gives the loss curve of the stored logits; resume with a teacher is exact."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.distill.conftest import REPO, run, student_config, write_json
from xdpx.cli import run_chain
from xdpx.data import processors
from xdpx.data.dataset import open_split
from xdpx.data.meta import read_meta

STSB = REPO / "examples/data/sample/stsb"


def scored_rows(path: Path, k: int) -> tuple[list[list[str]], np.ndarray]:
    rows = [line.rstrip("\n").split("\t") for line in path.read_text(encoding="utf-8").splitlines()]
    return [r[:-k] for r in rows], np.array([[float(v) for v in r[-k:]] for r in rows], dtype=np.float32)


def student_processor(data_dir: Path):
    from xdpx.config.options import Args

    return processors.get("single_with_logits")(Args(read_meta(str(data_dir)), {}, set(), {}), data_dir=str(data_dir))


def test_logits_round_trip_x_pred_to_x_prepro_to_batches(distill_data):
    own, logits = scored_rows(distill_data["scored"] / "train.txt", 2)
    train = open_split(str(distill_data["student_data"]), "train")
    assert len(train) == len(own) == 240
    stored = np.stack([np.asarray(train[i]["logits"]) for i in range(len(train))])
    assert stored.dtype == np.float32 and np.array_equal(stored, logits)  # the file's numbers, bit for bit
    # and they are the teacher's: recomputed from the teacher run
    from xdpx.export.loading import load_run

    teacher = load_run(str(distill_data["teacher"]), "<last>")
    samples = [teacher.processor.encode(text) for _label, text in own]
    with torch.no_grad():
        recomputed = teacher.model(**teacher.processor.collate(samples)["net_input"]).numpy()
    np.testing.assert_allclose(stored, recomputed, rtol=1e-6, atol=1e-6)

    processor = student_processor(distill_data["student_data"])
    batch = processor.collate([train[i] for i in (0, 5, 7)])
    assert torch.equal(batch["teacher_logits"], torch.from_numpy(logits[[0, 5, 7]]))
    assert batch["texts"] == [[own[i][1]] for i in (0, 5, 7)]
    assert set(batch["net_input"]) == {"tokens"}
    dev = open_split(str(distill_data["student_data"]), "dev")  # plain labelled file: no logits
    assert "teacher_logits" not in processor.collate([dev[0], dev[1]])
    # the student's own inference input is text alone
    assert set(processor.encode("a fine film")) == {"tokens", "id"}


def test_a_bert_student_reads_the_same_logits(distill_data, tmp_path):
    run("x-prepro", tmp_path / "bert.hjson", {
        "data_source": str(distill_data["scored"]), "data_files": {"train.txt": "train"},
        "data_dir": str(tmp_path / "bert_data"), "processor": "bert_single_with_logits", "loader": "single_with_logits",
        "text_column": 1, "label_column": 0, "tokenizer": "bert", "max_len": 48, "workers": 1,
        "vocab_file": str(REPO / "examples/data/sample/vocab/chinese_vocab.txt")})
    _own, logits = scored_rows(distill_data["scored"] / "train.txt", 2)
    train = open_split(str(tmp_path / "bert_data"), "train")
    assert np.array_equal(np.stack([np.asarray(train[i]["logits"]) for i in range(len(train))]), logits)
    assert train[0]["input_ids"][0] == 101  # [CLS]: the BERT processor's own samples


def test_pair_logits_round_trip(tmp_path):
    """STS-B pairs binarised (score >= 3: similar), scored by a match_cnn with x-pred in config mode."""
    with open(STSB / "train.tsv", encoding="utf-8") as f:
        records = [r for r in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if len(r) >= 7]
    pairs = tmp_path / "pairs"
    pairs.mkdir()
    (pairs / "train.txt").write_text("".join(f"{r[5]}\t{r[6]}\t{'similar' if float(r[4]) >= 3 else 'different'}\n"
                                             for r in records[:120]), encoding="utf-8")
    common = {"loader": "pair", "tokenizer": "space", "max_len": 32, "workers": 1}
    run("x-prepro", tmp_path / "p1.hjson", {**common, "processor": "pair", "data_source": str(pairs),
                                            "data_dir": str(tmp_path / "teacher_data")})
    model = write_json(tmp_path / "model.hjson", {
        "__parent__": "${data_dir}/meta", "data_dir": str(tmp_path / "teacher_data"), "save_dir": str(tmp_path / "x"),
        "model": "match_cnn", "hidden_size": 16, "embedding_dim": 16, "loss": "cross_entropy", "batch_size": 16,
        "learning_rate": 1e-3, "major_metric": "accuracy", "max_epoch": 1})
    run("x-pred", tmp_path / "pred.hjson", {"config": str(model), "distill": True, "header": False,
                                            "predict_file_map": {str(pairs / "train.txt"): str(tmp_path / "scored.txt")}})
    run("x-prepro", tmp_path / "p2.hjson", {
        **common, "processor": "pair_with_logits", "loader": "pair_with_logits", "data_source": str(tmp_path),
        "data_files": {"scored.txt": "train"}, "data_dir": str(tmp_path / "student_data"),
        "target_map_file": str(tmp_path / "teacher_data/target_map.txt")})
    own, logits = scored_rows(tmp_path / "scored.txt", 2)
    train = open_split(str(tmp_path / "student_data"), "train")
    assert np.array_equal(np.stack([np.asarray(train[i]["logits"]) for i in range(len(train))]), logits)
    teacher_train = open_split(str(tmp_path / "teacher_data"), "train")
    for i in (0, 50, 119):  # the same pair of token sequences and the same label as without logits
        assert np.array_equal(train[i]["tokens1"], teacher_train[i]["tokens1"])
        assert np.array_equal(train[i]["tokens2"], teacher_train[i]["tokens2"])
        assert train[i]["target"] == teacher_train[i]["target"]


def loss_curve(save_dir: Path) -> list[float]:
    rows = [line.split("\t") for line in (save_dir / "train.log.tsv").read_text().splitlines()]
    column = rows[0].index("loss")
    return [float(r[column]) for r in rows[1:]]


@pytest.fixture(scope="module")
def online_run(distill_data) -> Path:
    root = distill_data["root"]
    config = student_config(root, distill_data["student_data"], root / "online", teacher=str(distill_data["teacher"]))
    assert run_chain(["x-train", str(config)]) == 0
    return root / "online"


def test_online_teacher_gives_the_loss_curve_of_its_stored_logits(distill_data, online_run):
    root = distill_data["root"]
    static = student_config(root, distill_data["student_data"], root / "static")
    assert run_chain(["x-train", str(static)]) == 0
    online, offline = loss_curve(online_run), loss_curve(root / "static")
    assert len(online) == len(offline) >= 5
    # the stored logits are x-pred's 7 significant digits of the same numbers
    np.testing.assert_allclose(online, offline, rtol=2e-5)


def test_resume_with_an_online_teacher_is_exact(distill_data, online_run, tmp_path):
    from xdpx.models.checkpoints import load_torch

    teacher = str(distill_data["teacher"])
    first = student_config(tmp_path, distill_data["student_data"], tmp_path / "run", teacher=teacher, train_steps=5)
    assert run_chain(["x-train", str(first)]) == 0
    assert load_torch(str(tmp_path / "run" / "state.pt"))["counters"]["num_updates"] == 5
    resumed = student_config(tmp_path, distill_data["student_data"], tmp_path / "run", teacher=teacher, resume=True)
    assert run_chain(["x-train", str(resumed)]) == 0
    a, b = load_torch(str(tmp_path / "run" / "state.pt"))["model"], load_torch(str(online_run / "state.pt"))["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert (tmp_path / "run" / "valid.log.tsv").read_text() == (online_run / "valid.log.tsv").read_text()
