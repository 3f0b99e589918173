"""Parsers: one raw record (a line, or an item of a JSON array) -> a list of columns (strings).

Which columns hold the text(s) and the label is the loader's business (see loading.py); a parser only
splits. Every parser is line-oriented except ``json``, which reads a whole JSON array (use ``jsonl`` for
large files: it streams).
"""

from __future__ import annotations

import csv
import json
import math
import sys
from collections.abc import Iterator
from typing import IO, Any

from xdpx.config.options import Option
from xdpx.data import parsers
from xdpx.data.errors import BadLine


class Parser:
    """Base class. ``records`` yields (line number, raw record); ``parse`` turns one into columns."""

    options: list[Any] = []
    # Whether the reader may hand raw lines (bytes) to worker processes and decode them there.
    line_based = True
    records_are = "lines"  # what a record is, in x-prepro's report ("12 samples from 12 lines of train.tsv")

    def __init__(self, args: Any) -> None:
        self.args = args

    def records(self, f: IO[bytes], path: str) -> Iterator[tuple[int, Any]]:
        for number, line in enumerate(f, 1):
            yield number, line.rstrip(b"\r\n")

    def parse(self, record: Any) -> list[str]:
        raise NotImplementedError


def no_carriage_return(record: str) -> str:
    """Lines end at \n (a \r before it is dropped); a \r left inside a record means old Mac line ends
    (\r alone), which would glue many records into one."""
    if "\r" in record:
        raise BadLine("a carriage return (\\r) inside the line: a file with \\r line ends? Convert them to \\n")
    return record


class NonFinite:
    """What NaN, Infinity and -Infinity parse to: Python's json accepts them, JSON does not (json.dumps and
    pandas write a missing float as NaN). A marker rather than an error at parse time, so that the record
    holding it is the bad line (a json array file is parsed whole)."""

    def __init__(self, name: str) -> None:
        self.name = name


def _json_int(text: str) -> int:
    """A JSON integer; one longer than Python converts (sys.get_int_max_str_digits(), 4,300 digits by default)
    is a bad line rather than the ValueError int() raises."""
    try:
        return int(text)
    except ValueError:
        raise BadLine(f"a JSON number of {len(text.lstrip('-'))} digits, more than Python reads "
                      f"({sys.get_int_max_str_digits()}): quote it if it is a text or label, or drop the record"
                      ) from None


def loads_json(text: str) -> Any:
    """json.loads, with nesting too deep for Python's parser reported as invalid JSON, NaN / Infinity
    kept as :class:`NonFinite` for :func:`_columns_of` to refuse, and an integer too long to convert a
    bad line."""
    try:
        return json.loads(text, parse_constant=NonFinite, parse_int=_json_int)
    except RecursionError:
        raise BadLine("invalid JSON: nested too deeply") from None


class JsonValue(str):
    """A column read from a JSON number, true/false or null: its JSON text (1, 0.5, true; null is ''),
    marked with its kind and field. The loader refuses it as a text (a number where a text belongs is a
    misplaced field, and str() of it would be trained on as text) but takes a number or boolean as a label
    (class ids, regression targets)."""

    kind: str
    field: str
    source: str  # "JSON", or "table" for a cell of a Parquet/Excel/Arrow table (xdpx/data/tables.py)

    def __new__(cls, text: str, kind: str, field: str, source: str = "JSON") -> JsonValue:
        value = super().__new__(cls, text)
        value.kind, value.field, value.source = kind, field, source
        return value

    def __reduce__(self) -> tuple[object, ...]:  # keep kind and field when sent to or from a worker process
        return JsonValue, (str(self), self.kind, self.field, self.source)


def _unescape(value: str | None) -> str | None:
    # `delimiter: "\t"` in hjson is already a tab; `delimiter: \t` unquoted arrives as two characters.
    return {"\\t": "\t", "tab": "\t"}.get(value, value) if value is not None else None


@parsers.register("csv")
class DelimitedParser(Parser):
    """Columns separated by a delimiter, one record per line (tab by default, no quoting)."""

    options = [
        Option("delimiter", str, default="\t", validate=lambda d: len(_unescape(d) or "") == 1,
               validate_msg="one character, e.g. ',' or '\\t'", doc="the column separator"),
        Option("quotechar", str, default=None,
               doc="the quote character of csv files that quote fields (e.g. '\"'); null: no quoting, "
                   "quotes are kept as text"),
    ]

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.delimiter = _unescape(args.delimiter)
        self.quotechar = args.quotechar

    def records(self, f: IO[bytes], path: str) -> Iterator[tuple[int, Any]]:
        if self.quotechar is None:
            yield from super().records(f, path)
            return
        # A quoted field may span lines: join lines while a quote is open (an odd count so far).
        quote = self.quotechar.encode()
        start, parts, open_quotes = 0, [], 0
        for number, line in enumerate(f, 1):
            if not parts:
                start = number
            parts.append(line)
            open_quotes += line.count(quote)
            if open_quotes % 2 == 0:
                yield start, b"".join(parts).rstrip(b"\r\n")
                parts, open_quotes = [], 0
        if parts:
            yield start, b"".join(parts).rstrip(b"\r\n")

    def parse(self, record: str) -> list[str]:
        if self.quotechar is None:
            return no_carriage_return(record).split(self.delimiter)
        try:
            return next(csv.reader([record], delimiter=self.delimiter, quotechar=self.quotechar, strict=True))
        except csv.Error as e:
            raise BadLine(f"malformed csv: {e}") from None


@parsers.register("tsv")
class TabParser(DelimitedParser):
    """Tab-separated columns without quoting (the csv parser with its defaults, under a clearer name)."""

    options = [Option("quotechar", str, default=None, doc="the quote character; null: no quoting")]

    def __init__(self, args: Any) -> None:
        Parser.__init__(self, args)
        self.delimiter, self.quotechar = "\t", args.quotechar


@parsers.register("lines")
class LineParser(Parser):
    """The whole line is one column (plain text, corpora)."""

    def parse(self, record: str) -> list[str]:
        return [no_carriage_return(record)]


def _columns_of(item: Any, fields: list[str] | None) -> list[str]:
    if isinstance(item, dict):
        if fields is None:
            values = list(item.values())
        else:
            present = [f in item for f in fields]
            # Trailing fields may be absent (an unlabelled file); a gap in the middle is an error.
            n = len(present) - present[::-1].index(True) if any(present) else 0
            missing = [f for f, p in zip(fields[:n], present[:n]) if not p]
            if missing or n == 0:
                raise BadLine(f"missing field(s) {missing or fields}")
            values = [item[f] for f in fields[:n]]
    elif isinstance(item, list):
        values = item
    else:
        raise BadLine(f"expected a JSON object or array, got {type(item).__name__}")
    if isinstance(item, dict):
        names = list(item) if fields is None else fields
    else:
        names = [f"column {i}" for i in range(len(values))]
    columns: list[str] = []
    for name, value in zip(names, values):
        field = f"field {name!r}" if isinstance(item, dict) else name
        if isinstance(value, list) and all(isinstance(v, str) for v in value):  # a multilabel label set
            columns.append(JsonValue(json.dumps(value, ensure_ascii=False), "list", field))
            continue
        if isinstance(value, (dict, list)):
            raise BadLine(f"{field}: nested JSON values cannot be text or labels (a label set is a list of strings)")
        # 1e999 parses to inf as well: no JSON number may become an infinite or NaN text or label.
        if isinstance(value, NonFinite):
            raise BadLine(f"{field} is {value.name}, which is not a JSON value (a missing value written as NaN by "
                          "Python's json or pandas?): give a real value, or drop the record")
        if isinstance(value, float) and not math.isfinite(value):
            raise BadLine(f"{field} is a number too large for a float (it reads as {value}): give a real value, "
                          "or drop the record")
        if isinstance(value, str):
            columns.append(value)
        else:
            kind = "null" if value is None else "boolean" if isinstance(value, bool) else "number"
            text = "" if value is None else json.dumps(value)
            if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
                text = str(int(value))  # 1.0 (or 1e0) is the label 1, as a whole-number cell of a table is
            columns.append(JsonValue(text, kind, field))
    return columns


JSON_FIELDS = Option("fields", list[str], default=None,
                     doc="keys to read from each object, in column order for the loader (e.g. [text, label]); "
                         "trailing keys may be missing (unlabelled files); null: all values in file order")


@parsers.register("jsonl")
class JsonLinesParser(Parser):
    """One JSON object (or array) per line; ``fields`` picks and orders the columns."""

    options = [JSON_FIELDS]

    def parse(self, record: str) -> list[str]:
        try:
            item = loads_json(record)
        except json.JSONDecodeError as e:
            raise BadLine(f"invalid JSON: {e.msg} at column {e.colno}") from None
        return _columns_of(item, self.args.fields)


@parsers.register("json")
class JsonParser(Parser):
    """A file holding one JSON array of objects (read whole: use jsonl for large data)."""

    options = [JSON_FIELDS]
    line_based = False

    def records(self, f: IO[bytes], path: str) -> Iterator[tuple[int, Any]]:
        try:
            items = loads_json(f.read().decode("utf-8-sig"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise BadLine(f"invalid JSON file: {e}", where=path) from None
        except BadLine as e:
            raise BadLine(e.reason, where=path) from None
        if not isinstance(items, list):
            raise BadLine("a json file must hold one array of records (use jsonl for one per line)", where=path)
        yield from enumerate(items, 1)

    def parse(self, record: Any) -> list[str]:
        return _columns_of(record, self.args.fields)
