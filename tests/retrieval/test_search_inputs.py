"""x-script build_index / search on weak inputs: a blank line among the texts, a run given by a relative
path, a cut vectors file, a run trained again with another width. Each is one line and exit 1, nothing
written, or handled (the relative path)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from retrieval_helpers import SAMPLE, train_config

from xdpx.cli import run_chain, x_script

TEXTS = [line.split("\t")[1] for line in (SAMPLE / "dev.tsv").read_text().splitlines()[:6]]


def build(run: Path, texts: Path, out: Path, *flags: str) -> int:
    return x_script(["build_index", str(run), str(texts), str(out), "--backend", "numpy", *flags])


def test_a_blank_line_before_more_texts_is_refused(retrieval_run, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS[:2]) + "\n\n" + "\n".join(TEXTS[2:]) + "\n")
    assert build(retrieval_run, texts, tmp_path / "index") == 1
    err = capsys.readouterr().err
    assert (f"{texts}:3: a blank line before more texts: the id of a text is its line number minus 1, and a "
            "skipped line would shift the ids after it; remove the blank line(s)") in err, err
    assert not (tmp_path / "index").exists()


def test_an_index_built_from_a_relative_run_path_is_searched_from_anywhere(retrieval_run, tmp_path, monkeypatch,
                                                                          capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n\n\n")  # blank lines at the end: no id moves
    monkeypatch.chdir(retrieval_run.parent)
    assert build(Path(retrieval_run.name), texts, tmp_path / "index") == 0
    facts = json.loads((tmp_path / "index/index.json").read_text())
    assert (facts["save_dir"], facts["count"]) == (str(retrieval_run), len(TEXTS))
    assert facts["checkpoint"].startswith(str(retrieval_run) + "/")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert x_script(["search", "index", TEXTS[3], "--k", "1"]) == 0
    row = capsys.readouterr().out.splitlines()[1].split("\t")
    assert (row[3], row[5]) == ("3", TEXTS[3])  # id 3 is line 4 of the file


@pytest.mark.parametrize("backend", ["numpy", "faiss"])
def test_a_cut_vectors_file_is_named(backend, retrieval_run, tmp_path, capsys):
    if backend == "faiss":
        pytest.importorskip("faiss")
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    assert x_script(["build_index", str(retrieval_run), str(texts), str(tmp_path / "index"), "--backend", backend]) == 0
    vectors = tmp_path / "index" / ("vectors.npy" if backend == "numpy" else "vectors.faiss")
    vectors.write_bytes(vectors.read_bytes()[: vectors.stat().st_size // 2])
    capsys.readouterr()
    assert x_script(["search", str(tmp_path / "index"), TEXTS[0]]) == 1
    err = capsys.readouterr().err
    reason = "Failed to read all data for array" if backend == "numpy" else "FAISS cannot read it"
    assert err == (f"x-script search: error: {vectors} is truncated or corrupt ({reason}): build the index again "
                   "with x-script build_index\n"), err


def test_a_run_trained_again_with_another_width_is_refused(retrieval_run, retrieval_data, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(retrieval_run, run)
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    assert build(run, texts, tmp_path / "index") == 0
    before = {p.name: p.read_bytes() for p in (tmp_path / "index").iterdir()}
    try:  # a quantized (FAISS binary) index of the same run, refused alike after the one retraining below
        pytest.importorskip("faiss")
        binary = tmp_path / "binary"
        assert x_script(["build_index", str(run), str(texts), str(binary), "--quantize", "binary"]) == 0
    except pytest.skip.Exception:
        binary = None
    shutil.rmtree(run)  # the same folder now holds a run of width 16, its checkpoint under the same name
    config = train_config(tmp_path, retrieval_data, hidden_size=16, intermediate_size=24, max_epoch=...,
                          max_update=20, eval_interval=20)
    assert run_chain(["x-train", str(config)]) == 0
    capsys.readouterr()
    assert x_script(["search", str(tmp_path / "index"), TEXTS[0]]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'index'} holds vectors of dim 32, but run {run} (" in err and \
        "embeds in dim 16: the run was trained again after build_index; build the index again" in err, err
    assert {p.name: p.read_bytes() for p in (tmp_path / "index").iterdir()} == before
    assert np.load(tmp_path / "index/vectors.npy").shape == (len(TEXTS), 32)
    if binary is not None:
        assert x_script(["search", str(binary), TEXTS[0]]) == 1
        err = capsys.readouterr().err
        assert f"{binary} holds vectors of dim 32, but run {run} (" in err and \
            "embeds in dim 16: the run was trained again after build_index; build the index again" in err, err
