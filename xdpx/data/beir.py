"""Reader of a retrieval set in the BEIR format: a folder with

- ``corpus.jsonl``: one JSON object per line, ``{"_id": ..., "title": ..., "text": ...}`` (title optional);
- ``queries.jsonl``: ``{"_id": ..., "text": ...}`` per line;
- ``qrels/<split>.tsv``: a header line (``query-id<TAB>corpus-id<TAB>score``), then one judgement per line:
  query id, document id, an integer grade (>= 1 relevant, 0 judged not relevant).

Ids are read as strings (a number in ``_id`` is its decimal text). Blank lines are skipped. Every problem is
one line naming the file and the line, a :class:`BeirError` (a config error: exit 2): a line that is not
a JSON object or lacks ``_id`` / ``text``, a duplicate id, an empty corpus, a qrels line without three
columns or with a grade that is not an integer, a query or document id the qrels name that is not in
queries.jsonl / corpus.jsonl, a pair judged twice, qrels without a judgement.

Queries without a judgement (in queries.jsonl, absent from the split's qrels) are skipped: they are not
evaluated (as BEIR does) and :attr:`BeirSet.unjudged` counts them, which :meth:`BeirSet.summary` reports.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from xdpx.config.errors import ConfigError


class BeirError(ConfigError):
    """A BEIR-format file that cannot be read: one line, ``file:line: problem``."""


@dataclass
class BeirSet:
    """A corpus, the judged queries and their judgements (``qrels[query][document] = grade``)."""

    corpus: dict[str, tuple[str, str]]  # id -> (title, text), in file order
    queries: dict[str, str]  # judged queries only: id -> text, in file order
    qrels: dict[str, dict[str, int]]
    unjudged: int = 0  # queries of queries.jsonl without a judgement: skipped
    source: str = field(default="")

    def summary(self) -> str:
        judgements = sum(len(j) for j in self.qrels.values())
        skipped = f"; {self.unjudged} queries without a judgement skipped" if self.unjudged else ""
        return (f"{self.source}: {len(self.corpus)} documents, {len(self.queries)} judged queries, "
                f"{judgements} judgements{skipped}")


def _records(path: Path, keys: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    """(line number, {key: text}) of each non-blank line of a jsonl file; ids unique."""
    if not path.is_file():
        raise BeirError(f"{path}: no such file (a BEIR folder holds corpus.jsonl, queries.jsonl and qrels/<split>.tsv)")
    out: list[tuple[int, dict[str, str]]] = []
    seen: dict[str, int] = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as e:
                raise BeirError(f"{path}:{number}: not a JSON object ({e.msg})") from None
            if not isinstance(record, dict):
                raise BeirError(f"{path}:{number}: not a JSON object (a {type(record).__name__})")
            for key in ("_id", "text"):
                if not isinstance(record.get(key), (str, int)) or isinstance(record.get(key), bool):
                    raise BeirError(f"{path}:{number}: no {key!r} (each line needs \"_id\" and \"text\")")
            item = {"_id": str(record["_id"]), "text": str(record["text"])}
            if "title" in keys:
                title = record.get("title") or ""
                if not isinstance(title, str):
                    raise BeirError(f"{path}:{number}: 'title' must be a string")
                item["title"] = title
            if item["_id"] in seen:
                raise BeirError(f"{path}:{number}: id {item['_id']!r} is already on line {seen[item['_id']]}: "
                                "ids must be unique")
            seen[item["_id"]] = number
            out.append((number, item))
    return out


def read_qrels(path: Path, queries: dict[str, str], corpus: dict[str, tuple[str, str]]) -> dict[str, dict[str, int]]:
    """The judgements of a qrels TSV, every id checked against the queries and the corpus."""
    if not path.is_file():
        raise BeirError(f"{path}: no such file (the judgements of the split: query-id, corpus-id, score)")
    qrels: dict[str, dict[str, int]] = {}
    where: dict[tuple[str, str], int] = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            columns = line.rstrip("\r\n").split("\t")
            if number == 1 and [c.strip() for c in columns] == ["query-id", "corpus-id", "score"]:
                continue  # the header
            if len(columns) != 3:
                raise BeirError(f"{path}:{number}: expected 3 tab-separated columns (query-id, corpus-id, score), "
                                f"got {len(columns)}")
            query, doc, score = (c.strip() for c in columns)
            try:
                grade = int(score)
            except ValueError:
                first = " (the first line must be the header query-id, corpus-id, score)" if number == 1 else ""
                raise BeirError(f"{path}:{number}: the score {score[:20]!r} is not an integer{first}") from None
            if query not in queries:
                raise BeirError(f"{path}:{number}: query id {query!r} is not in queries.jsonl")
            if doc not in corpus:
                raise BeirError(f"{path}:{number}: document id {doc!r} is not in corpus.jsonl")
            if (query, doc) in where:
                raise BeirError(f"{path}:{number}: query {query!r} and document {doc!r} are already judged on line "
                                f"{where[query, doc]}")
            where[query, doc] = number
            qrels.setdefault(query, {})[doc] = grade
    if not qrels:
        raise BeirError(f"{path}: no judgement (lines of query-id, corpus-id, score after the header)")
    return qrels


def read_beir(folder: str | Path, split: str = "test") -> BeirSet:
    """The corpus, judged queries and qrels of ``folder`` for ``split`` (``qrels/<split>.tsv``)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise BeirError(f"{folder}: no such folder (a BEIR folder holds corpus.jsonl, queries.jsonl, qrels/)")
    corpus = {r["_id"]: (r["title"], r["text"]) for _, r in _records(folder / "corpus.jsonl", ("title",))}
    if not corpus:
        raise BeirError(f"{folder / 'corpus.jsonl'}: the corpus is empty (one JSON document per line)")
    queries = {r["_id"]: r["text"] for _, r in _records(folder / "queries.jsonl", ())}
    qrels = read_qrels(folder / "qrels" / f"{split}.tsv", queries, corpus)
    judged = {q: text for q, text in queries.items() if q in qrels}
    return BeirSet(corpus, judged, qrels, unjudged=len(queries) - len(judged), source=str(folder))
