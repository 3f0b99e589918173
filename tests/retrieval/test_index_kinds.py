"""Approximate (HNSW, IVF) and quantized (int8, binary) indexes of x-script build_index: the recall@10 against
the exact search, by hand on a few vectors and as build_index prints and stores it; search reads each kind
back; the refusals of a kind without FAISS and of an unknown kind (exit 2), and of a binary index whose run
was trained again with another width (exit 1)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from retrieval_helpers import SAMPLE

from xdpx.cli import x_script
from xdpx.runtime.index_kinds import default_params, pack_signs, recall_at_k
from xdpx.runtime.vector_index import NumpyIndex

TEXTS = list(dict.fromkeys(line.split("\t")[1] for line in (SAMPLE / "train.tsv").read_text().splitlines()))


def test_recall_against_the_exact_search_by_hand():
    # unit vectors at 0, 10, 90 and 180 degrees; exact top-2 by hand: 0 -> {0, 1}, 1 -> {1, 0}, 2 -> {2, 1},
    # 3 -> {3, 2}
    angles = np.radians([0.0, 10.0, 90.0, 180.0])
    vectors = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    exact = NumpyIndex(2)
    exact.add(vectors)
    assert recall_at_k(vectors, exact, k=2) == (1.0, 4)
    # an index of the negated vectors returns the farthest two: 0 -> {3, 2}, 1 -> {3, 2}, 2 -> {0, 3} (cosine
    # 0 both, below the exact 2nd best cos 80), 3 -> {0, 1}: none of the 8 is right
    farthest = NumpyIndex(2)
    farthest.add(-vectors)
    assert recall_at_k(vectors, farthest, k=2) == (0.0, 4)
    # id 4 is a copy of id 0; an index whose id 0 moved to 5 degrees answers id 4 for queries 0 and 4: it
    # ties with id 0 at the exact best score, so it counts (by ids alone query 0 would be a miss: 0.8)
    twins = np.concatenate([vectors, vectors[:1]])
    moved = NumpyIndex(2)
    moved.add(np.concatenate([[[np.cos(np.radians(5.0)), np.sin(np.radians(5.0))]], twins[1:]]).astype(np.float32))
    assert moved.search(twins[[0, 4]], 1)[1].tolist() == [[4], [4]]
    assert recall_at_k(twins, moved, k=1) == (1.0, 5)


def test_signs_and_ivf_sizes():
    assert pack_signs(np.array([[0.5, -1, 0, 2, 1, 1, -1, 1, 3]])).tolist() == [[0b10011101, 0b10000000]]
    assert default_params("ivf", 1000) == {"nlist": 25, "nprobe": 8}  # 1000 // 39 caps 4 sqrt(1000); 8 probes
    assert default_params("ivf", 200) == {"nlist": 5, "nprobe": 5}  # fewer than 8 clusters: all probed
    assert default_params("ivf", 100_000) == {"nlist": 1264, "nprobe": 316}
    assert default_params("ivf", 10) == {"nlist": 1, "nprobe": 1}


@pytest.mark.parametrize("kind,quantize", [("hnsw", "none"), ("ivf", "none"), ("exact", "int8"),
                                           ("exact", "binary"), ("hnsw", "int8")])
def test_build_index_reports_recall_and_search_reads_the_kind(kind, quantize, retrieval_run, tmp_path, capsys):
    pytest.importorskip("faiss")
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    out = tmp_path / "index"
    assert x_script(["build_index", str(retrieval_run), str(texts), str(out), "--index", kind,
                     "--quantize", quantize]) == 0
    printed = capsys.readouterr().out
    facts = json.loads((out / "index.json").read_text())
    assert (facts["index"], facts["quantize"], facts["count"], facts["dim"]) == (kind, quantize, len(TEXTS), 32)
    assert facts["recall_queries"] == len(TEXTS)  # fewer than 1000 texts: every one is a query
    match = re.search(r"recall@10 (\S+) against the exact float32 search \((\d+) of the indexed texts as queries\)",
                      printed)
    assert match and float(match[1]) == pytest.approx(facts["recall_at_10"], abs=5e-5), printed
    assert 0.0 < facts["recall_at_10"] <= 1.0
    if quantize == "none":  # approximate search of the sample's distinct positives: (almost) all of the exact answers
        assert facts["recall_at_10"] >= 0.9
    assert x_script(["search", str(out), TEXTS[5], "--k", "3"]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()[1:]]
    assert [r[2] for r in rows] == ["1", "2", "3"]
    assert rows[0][5] == TEXTS[5] and rows[0][3] == "5"  # the query is an indexed text: it finds itself first
    if quantize == "binary":
        assert float(rows[0][4]) == 1.0  # every sign agrees: 1 - 2 * 0 / 32


def test_an_approximate_index_needs_faiss_and_a_known_kind(retrieval_run, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS[:5]) + "\n")
    assert x_script(["build_index", str(retrieval_run), str(texts), str(tmp_path / "a"), "--backend", "numpy",
                     "--index", "hnsw"]) == 2
    assert capsys.readouterr().err == ("x-script build_index: error: --index hnsw --quantize none is a FAISS index: "
                                       "use --backend faiss or auto (faiss-cpu, the faiss extra)\n")
    assert x_script(["build_index", str(retrieval_run), str(texts), str(tmp_path / "a"), "--quantize", "int4"]) == 2
    assert "--quantize 'int4': one of none, int8, binary." in capsys.readouterr().err
    assert not (tmp_path / "a").exists()
