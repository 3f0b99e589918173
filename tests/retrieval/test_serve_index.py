"""x-serve --corpus INDEX_FOLDER: POST /search over an index x-script build_index wrote answers, for HNSW, the
same hits as over the texts file it was built from, and for IVF, int8 and binary the hits x-script search gives
on the same folder; an index of another run, or a folder that is not an
index, is refused at start (exit 2, one line). /openapi.json lists /search with its body and hit fields."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from retrieval_helpers import REPO, SAMPLE

from xdpx.cli import x_script

sys.path.insert(0, str(REPO / "tests/inference"))
from serve_helpers import request, running_server  # noqa: E402

pytest.importorskip("faiss")  # build_index --index hnsw is a FAISS index (the faiss extra)

# every distinct positive of the committed sample (no duplicate texts: equal scores could come back in
# either order from the two searches)
TEXTS = list(dict.fromkeys(line.split("\t")[1] for split in ("train", "dev", "test")
                           for line in (SAMPLE / f"{split}.tsv").read_text().splitlines()))
QUERIES = [line.split("\t")[0] for line in (SAMPLE / "dev.tsv").read_text().splitlines()[:4]]


@pytest.fixture(scope="module")
def corpus(retrieval_run: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("serve_index")
    (root / "corpus.txt").write_text("".join(t + "\n" for t in TEXTS))
    assert x_script(["build_index", str(retrieval_run), str(root / "corpus.txt"), str(root / "hnsw"),
                     "--index", "hnsw"]) == 0
    return {"texts": root / "corpus.txt", "hnsw": root / "hnsw"}


def search_all(address: tuple[str, int]) -> list[dict[str, object]]:
    answers = []
    for query in QUERIES:
        status, answer, _ = request(address, "POST", "/search", json.dumps({"query": query, "k": 10}).encode())
        assert status == 200, answer
        answers.append(answer)
    return answers


def test_search_of_an_hnsw_index_folder_answers_the_hits_of_its_texts(retrieval_run, corpus):
    facts = json.loads((corpus["hnsw"] / "index.json").read_text())
    assert facts["index"] == "hnsw" and facts["count"] == len(TEXTS) == 271 and facts["recall_at_10"] == 1.0
    with running_server(retrieval_run, "--corpus", str(corpus["texts"])) as server:
        from_texts = search_all(server.address)
    with running_server(retrieval_run, "--corpus", str(corpus["hnsw"])) as server:
        from_index = search_all(server.address)
        status, schema, _ = request(server.address, "GET", "/openapi.json")
        info = request(server.address, "GET", "/info")[1]
    for texts, index in zip(from_texts, from_index):
        assert [(h["rank"], h["id"], h["text"]) for h in index["hits"]] == \
            [(h["rank"], h["id"], h["text"]) for h in texts["hits"]]
        assert [h["score"] for h in index["hits"]] == pytest.approx([h["score"] for h in texts["hits"]], abs=1e-5)
        assert all(TEXTS[h["id"]] == h["text"] for h in index["hits"]) and len(index["hits"]) == 10
    # the document of the server that searches: /search's body fields and its hit's fields
    assert status == 200 and "/search" in schema["paths"] and "/search" in info["routes"]
    search = schema["paths"]["/search"]["post"]
    body = search["requestBody"]["content"]["application/json"]["schema"]
    assert body["required"] == ["query"] and set(body["properties"]) == {"query", "k", "rerank"}
    assert body["properties"]["k"] == {"type": "integer", "minimum": 1, "maximum": 1000, "default": 10,
                                       "description": "the number of hits answered"}
    assert "no --reranker" in body["properties"]["rerank"]["description"]
    assert set(search["responses"]) == {"200", "400", "404", "422"}
    answer = search["responses"]["200"]["content"]["application/json"]["schema"]
    assert answer["properties"]["hits"]["items"] == {"$ref": "#/components/schemas/Hit"}
    hit = schema["components"]["schemas"]["Hit"]
    assert hit["required"] == ["rank", "id", "text", "score"]
    assert set(hit["properties"]) == {"rank", "id", "text", "score", "rerank_score", "first_stage_rank"}


@pytest.mark.parametrize("kind", [["--index", "ivf"], ["--quantize", "int8"], ["--quantize", "binary"]],
                         ids=["ivf", "int8", "binary"])
def test_search_of_an_approximate_index_folder_answers_what_x_script_search_does(retrieval_run, corpus, tmp_path,
                                                                                 capsys, kind):
    """IVF, int8 and binary folders: x-serve answers each query with the hits the index itself gives (x-script
    search on the same folder), not the exact search's: the approximation is the index's, as built."""
    folder = tmp_path / kind[1]
    assert x_script(["build_index", str(retrieval_run), str(corpus["texts"]), str(folder), *kind]) == 0
    capsys.readouterr()
    assert x_script(["search", str(folder), *QUERIES, "--k", "10"]) == 0
    lines = [line.split("\t") for line in capsys.readouterr().out.splitlines()[1:]]
    expected = [[(int(c[2]), int(c[3]), float(c[4])) for c in lines if c[0] == str(n)] for n in range(4)]
    with running_server(retrieval_run, "--corpus", str(folder)) as server:
        answers = search_all(server.address)
    for want, answer in zip(expected, answers):
        assert [(h["rank"], h["id"]) for h in answer["hits"]] == [(rank, i) for rank, i, _ in want] and want
        assert [h["score"] for h in answer["hits"]] == pytest.approx([score for _, _, score in want], rel=1e-5,
                                                                      abs=1e-6)
        assert all(TEXTS[h["id"]] == h["text"] for h in answer["hits"])
    if kind[1] == "binary":  # scored by Hamming distance: 1 - 2 h / dim, h a whole number of bits
        dim = json.loads((folder / "index.json").read_text())["dim"]
        bits = [(1 - h["score"]) * dim / 2 for a in answers for h in a["hits"]]
        assert bits == pytest.approx([round(b) for b in bits], abs=1e-4)


def test_x_serve_refuses_an_index_of_another_run_or_a_folder_that_is_not_one(retrieval_run, corpus, tmp_path,
                                                                             capsys):
    from xdpx.serve.command import main

    other = tmp_path / "other_run"  # the same weights in another run folder: index.json names that run
    shutil.copytree(retrieval_run, other)
    assert x_script(["build_index", str(other), str(corpus["texts"]), str(tmp_path / "other_index"),
                     "--index", "hnsw"]) == 0
    capsys.readouterr()
    assert main([str(retrieval_run), "--port", "0", "--cpu", "--corpus", str(tmp_path / "other_index")]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]  # besides "loaded ..."
    assert len(errors) == 1, errors
    err = errors[0]
    assert err.startswith(f"x-serve: error: --corpus: the index {tmp_path / 'other_index'} was built with "
                          f"{other}/checkpoint-")
    assert f"x-serve serves {retrieval_run}/checkpoint-" in err and "build it with this run" in err
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("not an index\n")
    assert main([str(retrieval_run), "--port", "0", "--cpu", "--corpus", str(tmp_path / "plain")]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert errors == [f"x-serve: error: --corpus: {tmp_path / 'plain'} is not an index folder (no index.json): "
                      "build one with x-script build_index"]
    assert sorted(p.name for p in (tmp_path / "plain").iterdir()) == ["notes.txt"]  # nothing written


def test_the_document_lists_search_only_where_it_is_served() -> None:
    from xdpx.serve.limits import Limits
    from xdpx.serve.openapi import openapi_document

    assert "/search" not in openapi_document(Limits(), [], embeds=True)["paths"]  # a bi-encoder without --corpus
    assert "Hit" not in openapi_document(Limits(), [], embeds=True)["components"]["schemas"]
    served = openapi_document(Limits(max_text_chars=300), [], embeds=True, searches=True)
    assert served["paths"]["/search"]["post"]["requestBody"]["content"]["application/json"]["schema"][
        "properties"]["query"] == {"type": "string", "minLength": 1, "maxLength": 300}
