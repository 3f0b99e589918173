"""examples/retrieval/prepare_data.py's harder test folder, on the committed STS-B sample (the STS-B files as
shipped): the same queries and qrels as the test folder, its documents first with the same ids, then every
other distinct sentence of the three splits, never a query's own text."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from retrieval_helpers import REPO

STSB = REPO / "examples/data/sample/stsb"


def prepare_data() -> object:
    spec = importlib.util.spec_from_file_location("prepare_data", REPO / "examples/retrieval/prepare_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_jsonl(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_the_harder_folder_adds_every_other_sentence_and_keeps_the_judgements(tmp_path: Path) -> None:
    module = prepare_data()
    rows = module.pairs(str(STSB / "test.tsv"))
    module.write_beir(rows, module.second_sentences(str(STSB / "test.tsv")), str(tmp_path / "beir"))
    module.write_beir_all(str(tmp_path / "beir"), module.all_sentences(str(STSB)), str(tmp_path / "all"))
    for name in ("queries.jsonl", "qrels/test.tsv"):
        assert (tmp_path / "all" / name).read_text() == (tmp_path / "beir" / name).read_text()
    small, big = read_jsonl(tmp_path / "beir/corpus.jsonl"), read_jsonl(tmp_path / "all/corpus.jsonl")
    assert big[: len(small)] == small and [d["_id"] for d in big] == [f"d{i}" for i in range(len(big))]
    queries = {q["text"] for q in read_jsonl(tmp_path / "all/queries.jsonl")}
    sentences = set()
    for split in ("train", "dev", "test"):
        for line in (STSB / f"{split}.tsv").read_text(encoding="utf-8").splitlines():
            cells = line.split("\t")
            sentences |= {cells[5].strip(), cells[6].strip()}
    added = [d["text"] for d in big[len(small):]]
    # every distinct sentence once: the test folder's documents, or an added one unless it is a query's text
    assert len(added) == len(set(added)) and not set(added) & ({d["text"] for d in small} | queries)
    assert set(added) == sentences - {d["text"] for d in small} - queries
    assert len(rows) > 0 and len(added) > 3 * len(small)
