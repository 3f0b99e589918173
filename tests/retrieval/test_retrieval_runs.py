"""The bi-encoder end to end on the committed STS-B retrieval sample: x-prepro (one field per text, the
triplet loader's hard negatives, bad lines with file:line), valid.log.tsv == x-eval, x-pred's embeddings
(TSV and numpy), x-script build_index / search with FAISS and with numpy, x-serve's POST /embed, and a
kill -9 in the middle of training resumed bitwise."""

from __future__ import annotations

import csv
import json
import re
import signal
import sys
from pathlib import Path

import numpy as np
import pytest
from retrieval_helpers import REPO, SAMPLE, prepro, run_killable, train_config

from tests.train.train_helpers import assert_same_weights, final_weights
from xdpx.cli import run_chain, x_script
from xdpx.serve.embedding import embed_inputs
from xdpx.serve.predictor import BadInput, load_predictor


def read_tsv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def write_triplets(folder: Path, bad_line: str | None = None) -> None:
    """query, positive, hard negative (the next pair's positive: a similar caption of another scene), score."""
    folder.mkdir()
    for split in ("train", "dev"):
        rows = [line.split("\t") for line in (SAMPLE / f"{split}.tsv").read_text().splitlines()]
        lines = [f"{q}\t{p}\t{rows[(i + 1) % len(rows)][1]}\t{s}" for i, (q, p, s) in enumerate(rows)]
        if bad_line is not None and split == "dev":
            lines.insert(2, bad_line)
        (folder / f"{split}.tsv").write_text("\n".join(lines) + "\n")


def test_each_text_is_its_own_field_and_triplets_train_with_hard_negatives(retrieval_data, tmp_path):
    from xdpx.data.dataset import open_split
    from xdpx.data.dictionary import Dictionary

    vocab = Dictionary.load(str(retrieval_data / "vocab.txt"), "[PAD]", "[UNK]")
    sample = open_split(str(retrieval_data), "train")[0]
    assert sorted(k for k in sample if k.startswith("tokens")) == ["tokens1", "tokens2"]
    assert " ".join(vocab.string(sample["tokens1"])) == "[CLS] a plane is taking off. [SEP]"
    assert " ".join(vocab.string(sample["tokens2"])) == "[CLS] an air plane is taking off. [SEP]"
    write_triplets(tmp_path / "source")
    data = prepro(tmp_path, data_source=str(tmp_path / "source"), data_files={"train.tsv": "train", "dev.tsv": "dev"},
                  loader="triplet", label_column=3)
    assert "tokens3" in open_split(str(data), "dev")[0]
    (tmp_path / "run").mkdir()
    assert run_chain(["x-train", str(train_config(tmp_path / "run", data, max_update=4, eval_interval=4,
                                                  resume=False))]) == 0
    [row] = read_tsv(tmp_path / "run/run/valid.log.tsv")
    assert {"recall_at_1", "recall_at_10", "mrr"} <= set(row)


def test_a_record_without_its_hard_negative_is_a_bad_line(tmp_path, capsys):
    write_triplets(tmp_path / "source", bad_line="A man is dancing.\tA man dances.")
    with pytest.raises(BaseException):  # noqa: B017 (x-prepro stops: its message is checked)
        prepro(tmp_path, data_source=str(tmp_path / "source"), loader="triplet", label_column=3,
               data_files={"train.tsv": "train", "dev.tsv": "dev"})
    captured = capsys.readouterr()
    assert "dev.tsv:3" in captured.err + captured.out


def test_eval_equals_the_best_row_of_valid_log(retrieval_run, tmp_path):
    rows = read_tsv(retrieval_run / "valid.log.tsv")
    best = next(r for r in rows if r["step"] == rows[-1]["best_step"])
    out = tmp_path / "scores.tsv"
    config = {"save_dir": str(retrieval_run), "valid_subset": ["dev", str(SAMPLE / "dev.tsv")], "save_to_file": str(out)}
    (tmp_path / "eval.json").write_text(json.dumps(config))
    assert run_chain(["x-eval", str(tmp_path / "eval.json")]) == 0
    split, raw = read_tsv(out)
    columns = ["loss", "recall_at_1", "recall_at_10", "mrr", "pearson", "spearman"]
    assert [split[c] for c in columns] == [best[c] for c in columns] == [raw[c] for c in columns]
    assert float(best["recall_at_10"]) > float(best["recall_at_1"]) > 0


@pytest.fixture(scope="module")
def predictions(retrieval_run: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("pred")
    tsv, npz = root / "dev.pred.tsv", root / "dev.npz"
    for out, binary in ((tsv, False), (npz, True)):
        config = {"save_dir": str(retrieval_run), "predict_file_map": {str(SAMPLE / "dev.tsv"): str(out)},
                  "binary": binary}
        (root / "pred.json").write_text(json.dumps(config))
        assert run_chain(["x-pred", str(root / "pred.json")]) == 0
    return tsv, npz


def test_pred_writes_embeddings_and_their_cosine(predictions):
    tsv, npz = predictions
    rows, arrays = read_tsv(tsv), np.load(npz)
    assert list(rows[0]) == ["text1", "text2", "label", "cosine", "embedding1", "embedding2"]
    embeddings = arrays["embeddings"]
    assert embeddings.shape == (60, 2, 32) and np.allclose(np.linalg.norm(embeddings, axis=-1), 1, atol=1e-5)
    assert np.allclose(arrays["cosine"], (embeddings[:, 0] * embeddings[:, 1]).sum(-1), atol=1e-5)
    for row, pair, cosine in zip(rows, embeddings, arrays["cosine"]):
        assert float(row["cosine"]) == pytest.approx(float(cosine), abs=1e-6)
        assert [float(v) for v in row["embedding2"].split()] == pytest.approx(pair[1].tolist(), abs=1e-6)


def test_index_with_faiss_and_numpy_and_search_and_serve_agree(retrieval_run, predictions, tmp_path, capsys,
                                                                monkeypatch):
    pytest.importorskip("faiss")
    monkeypatch.setenv("XDPX_PROGRESS_SECONDS", "0")  # a progress line per batch of texts embedded, on stderr
    monkeypatch.delenv("XDPX_QUIET", raising=False)
    for backend in ("faiss", "numpy"):
        assert x_script(["build_index", str(retrieval_run), str(SAMPLE / "dev.tsv"), str(tmp_path / backend),
                         "--column", "1", "--backend", backend, "--batch-size", "8"]) == 0
        err = capsys.readouterr().err
        assert re.search(r"^x-script build_index: 1/\d+ batches \(\d+%\)", err, re.M), err
    assert (tmp_path / "faiss/vectors.faiss").exists() and (tmp_path / "numpy/vectors.npy").exists()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine/notes.txt").write_text("a user's file")
    assert x_script(["build_index", str(retrieval_run), str(SAMPLE / "dev.tsv"), str(tmp_path / "mine")]) == 2
    assert "holds files XDPX did not write (notes.txt)" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.txt"]
    vectors = np.load(tmp_path / "numpy/vectors.npy")
    pairs = np.load(predictions[1])["embeddings"]
    assert np.allclose(vectors, pairs[:, 1], atol=1e-5)  # a text embedded alone == as the 2nd text of its pair
    queries = [line.split("\t")[0] for line in (SAMPLE / "dev.tsv").read_text().splitlines()[:4]]
    answers = {}
    for backend in ("faiss", "numpy"):
        capsys.readouterr()
        assert x_script(["search", str(tmp_path / backend), *queries, "--k", "3"]) == 0
        answers[backend] = [line.split("\t") for line in capsys.readouterr().out.splitlines()[1:]]
    assert len(answers["numpy"]) == 12
    assert [a[:4] for a in answers["faiss"]] == [a[:4] for a in answers["numpy"]]
    assert [float(a[4]) for a in answers["faiss"]] == pytest.approx([float(a[4]) for a in answers["numpy"]], abs=1e-5)
    texts = [line.split("\t")[1] for line in (SAMPLE / "dev.tsv").read_text().splitlines()]
    for number, _query, _rank, i, score, text in answers["numpy"]:
        assert text == texts[int(i)]
        assert float(score) == pytest.approx(float(pairs[int(number), 0] @ vectors[int(i)]), abs=1e-5)
    # by brute force: the top 3 of query 0
    top = np.argsort(-(vectors @ pairs[0, 0]), kind="stable")[:3]
    assert [int(a[3]) for a in answers["numpy"][:3]] == top.tolist()

    sys.path.insert(0, str(REPO / "tests/inference"))
    from serve_helpers import request, running_server

    with running_server(retrieval_run) as server:
        status, embedded, _ = request(server.address, "POST", "/embed", json.dumps(texts[:5]).encode())
        bad = request(server.address, "POST", "/embed", json.dumps(["ok", ["a", "b"]]).encode())
        pair = request(server.address, "POST", "/predict", json.dumps([[queries[0], texts[0]]]).encode())
        schema = request(server.address, "GET", "/openapi.json")[1]
    assert status == 200, embedded
    assert np.allclose([e["embedding"] for e in embedded], vectors[:5], atol=1e-5)
    assert bad[0] == 400 and "input 1: an input of /embed is one non-empty text" in bad[1]["error"]
    assert pair[0] == 200 and pair[1][0]["cosine"] == pytest.approx(float(pairs[0, 0] @ pairs[0, 1]), abs=1e-5)
    assert "/embed" in schema["paths"]


def test_serve_refuses_a_nul_and_a_lone_surrogate_in_embed_and_predict(retrieval_run):
    """/embed and /predict (a pair as a JSON list) check each text as x-prepro does: a NUL or a lone
    surrogate is that input's error (400), the other inputs are answered."""
    predictor = load_predictor(str(retrieval_run), cpu=True, threads=1)
    nul, surrogate, fine = embed_inputs(predictor, ["a dog\x00runs", "a \udfffdog", "a dog runs"])
    assert isinstance(nul, BadInput) and str(nul).startswith("a NUL character in the text at position 5: "), nul
    assert isinstance(surrogate, BadInput) and str(surrogate).startswith(
        "a lone surrogate (U+DFFF) in the text at position 2: "), surrogate
    assert len(fine["embedding"]) > 1
    pair_nul, pair_surrogate, pair = predictor.predict_inputs([["a dog", "a cat\x00"], ["\ud800", "a cat"],
                                                               ["a dog", "a cat"]])
    assert isinstance(pair_nul, BadInput) and "a NUL character in the text at position 5" in str(pair_nul)
    assert isinstance(pair_surrogate, BadInput) and "a lone surrogate (U+D800)" in str(pair_surrogate)
    assert -1.0 <= pair["cosine"] <= 1.0


def test_kill_during_training_then_resume_is_bitwise(retrieval_data, retrieval_run, tmp_path):
    config = train_config(tmp_path, retrieval_data)
    assert run_killable(config, "update", 13) == -signal.SIGKILL
    assert run_killable(config) == 0
    assert_same_weights(final_weights(tmp_path / "run"), final_weights(retrieval_run))
    assert (tmp_path / "run/valid.log.tsv").read_text() == (retrieval_run / "valid.log.tsv").read_text()
