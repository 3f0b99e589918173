"""Reading token-classification (NER) data: CoNLL files, jsonl with character spans, the ``ner`` loader
and the ``char`` tokenizer.

    EU	B-ORG                      parser: conll     one token per line, its tag in the last column
    rejects	O                                         (tab-separated, else whitespace-separated); a blank
    ...                                               line between sentences; -DOCSTART- lines skipped
    {"text": "张三在北京", "entities": [[0, 2, "PER"], [3, 5, "LOC"]]}     parser: ner_jsonl (end exclusive)

Both become (text, tags) for the ``ner`` loader: a CoNLL sentence's text is its tokens joined by one
space (with ``tag_unit: char``, a character per line, joined without one). The loader cuts the text into units (``tag_unit``), checks one tag per unit, and writes the tags in
the run's ``tag_scheme`` (BIO or BIOES; either scheme is read from files). The tags become the target map.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any

from xdpx.config.options import Option
from xdpx.data import loaders, parsers, tokenizers
from xdpx.data.errors import BadLine
from xdpx.data.loading import Layout, Loader, check_text
from xdpx.data.parsing import NonFinite, Parser, loads_json, no_carriage_return
from xdpx.data.tags import SCHEMES, UNITS, entity_spans, spans_of_characters, split_tag, tags_of, units_of
from xdpx.data.tokenizing import Tokenizer

DOCSTART = "-DOCSTART-"


class TagSequence(str):
    """A sample's tags, one per unit, joined by spaces; ``names()`` lists them for the target map."""

    def names(self) -> list[str]:
        return self.split(" ") if self else []


class EntityList(str):
    """The entities of a jsonl record as JSON text, with the parsed list in ``entities``."""

    entities: list[Any]

    def __new__(cls, entities: list[Any]) -> EntityList:
        value = super().__new__(cls, json.dumps(entities, ensure_ascii=False))
        value.entities = entities
        return value

    def __reduce__(self) -> tuple[object, ...]:  # keep the list when sent to or from a worker process
        return EntityList, (self.entities,)


def _columns(line: str) -> list[str]:
    return line.split("\t") if "\t" in line else line.split()


def _line_problem(columns: list[str], width: int) -> str | None:
    if len(columns) != width:
        return f"{len(columns)} column(s), but the sentence's first line has {width}"
    if any(not c.strip() for c in columns):
        return "an empty column"
    if " " in columns[0]:
        return f"token {columns[0]!r} holds a space"
    if width > 1:
        try:
            split_tag(columns[-1])
        except BadLine as e:
            return e.reason
    return None


@parsers.register("conll")
class ConllParser(Parser):
    """CoNLL-style sentences: a token and its tag per line (tag in the last column; one column: no tags),
    a blank line after each sentence, ``-DOCSTART-`` lines skipped. A record is a sentence, numbered by its
    first line, or by its first malformed line, so that an error names that line. x-serve takes a request's
    string as the text itself (``text_requests``), not as a CoNLL record."""

    text_requests = True
    records_are = "sentences"

    def records(self, f: IO[bytes], path: str) -> Iterator[tuple[int, Any]]:
        lines: list[bytes] = []
        start = number = 0
        reported: int | None = None
        width = 0
        for number, raw in enumerate(f, 1):
            line = raw.rstrip(b"\r\n")
            if not line.strip() or line.startswith(DOCSTART.encode()):
                if lines:
                    yield reported or start, b"\n".join(lines)
                lines, reported = [], None
                continue
            if not lines:
                start = number
                width = len(_columns(line.decode("utf-8", errors="replace")))
            if reported is None and _line_problem(_columns(line.decode("utf-8", errors="replace")), width):
                reported = number
            lines.append(line)
        if lines:
            yield reported or start, b"\n".join(lines)

    def parse(self, record: str) -> list[str]:
        rows = [_columns(no_carriage_return(line)) for line in record.split("\n")]
        width = len(rows[0])
        for k, columns in enumerate(rows):
            problem = _line_problem(columns, width)
            if problem:
                where = "" if k == 0 else f" (line {k + 1} of the sentence)"
                raise BadLine(f"{problem}{where}: a CoNLL line is a token and its tag, tab-separated")
        # tokens joined by a space; with tag_unit char (a character per line) the characters as the text they are
        glue = "" if self.args.get("tag_unit") == "char" else " "
        text = glue.join(columns[0] for columns in rows)
        return [text] if width == 1 else [text, TagSequence(" ".join(columns[-1] for columns in rows))]


@parsers.register("ner_jsonl")
class NerJsonLinesParser(Parser):
    """One JSON object per line: ``{"text": ..., "entities": [[start, end, type], ...]}`` with character
    offsets into text (end exclusive); without "entities" the record is unlabelled (x-pred)."""

    def parse(self, record: str) -> list[str]:
        try:
            item = loads_json(record)
        except json.JSONDecodeError as e:
            raise BadLine(f"invalid JSON: {e.msg} at column {e.colno}") from None
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise BadLine('expected a JSON object with a "text" string (and "entities": [[start, end, type], ...])')
        if "entities" not in item:
            return [item["text"]]
        if not isinstance(item["entities"], list):
            raise BadLine('"entities" must be a list of [start, end, type]')
        for entity in item["entities"]:
            # NaN / Infinity (pandas' missing offsets) parse to a marker that no later step can compare or store
            values = entity if isinstance(entity, list) else [entity]
            bad = [value.name for value in values if isinstance(value, NonFinite)]
            if bad:
                raise BadLine(f"an entity holds {bad[0]}, not a number: an entity is [start, end, type] with "
                              "integer character offsets (end exclusive)")
        return [item["text"], EntityList(item["entities"])]


TAG_OPTIONS = [
    Option("tag_scheme", str, default="bio", choices=SCHEMES,
           doc="the tags the model predicts: bio (B-X begins, I-X continues an entity) or bioes (also E-X ends "
               "one, S-X is a single-unit entity). Files may use either; their tags are read as entities and "
               "written in this scheme (an I-X without B-X begins an entity, as conlleval reads it)"),
    Option("tag_unit", str, default="whitespace", choices=UNITS,
           doc="what one tag labels: whitespace (a token between spaces; CoNLL files, whose tokens are joined by "
               "a space) or char (each non-space character, for Chinese text without spaces)"),
]


@loaders.register("ner")
class NerLoader(Loader):
    """A text and its tags (conll) or character-span entities (ner_jsonl) -> (text, tags in tag_scheme)."""

    options = TAG_OPTIONS

    def __init__(self, args: Any) -> None:
        self.args = args
        self.scheme, self.unit = args.tag_scheme, args.tag_unit
        self.text_columns, self.label_column, self.num_texts, self.extra_columns = [0], 1, 1, False

    def is_labelled(self, columns: list[str]) -> bool:
        return len(columns) > 1

    def layout_of(self, columns: list[str], line: int = 1) -> Layout:
        return Layout(self.is_labelled(columns), None, line)

    def fields(self, columns: list[str], layout: Layout) -> tuple[list[str], str | None]:
        if not columns or not check_text(columns[0]).strip():
            raise BadLine("empty text")
        if len(columns) > 2:
            raise BadLine(f"expected a text and its tags, got {len(columns)} columns (parser: conll or ner_jsonl)")
        text = columns[0]
        if len(columns) == 1:
            return [text], None
        return [text], self.tags(text, columns[1])

    def tags(self, text: str, label: str) -> TagSequence:
        offsets = units_of(text, self.unit)
        if isinstance(label, EntityList):
            spans = spans_of_characters(offsets, label.entities, text)
        else:
            tags = label.split()
            if len(tags) != len(offsets):
                raise BadLine(f"{len(tags)} tags for {len(offsets)} units of the text (tag_unit: {self.unit}): one tag "
                              "per unit")
            spans = entity_spans(tags)
        return TagSequence(" ".join(tags_of(len(offsets), spans, self.scheme)))


@tokenizers.register("char")
class CharTokenizer(Tokenizer):
    """Every non-space character is a token (Latin letters and digits too): the units of tag_unit char."""

    def tokenize(self, text: str) -> list[str]:
        return [text[a:b] for a, b in units_of(text.lower() if self.lower else text, "char")]
