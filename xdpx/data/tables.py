"""Parsers of tables: Parquet files, Excel workbooks (.xlsx) and the Arrow files of a Hugging Face
``datasets`` folder written by ``save_to_disk``. A record is one row, as {column name: cell value}.

Columns are chosen by name with ``fields`` (as for the JSON parsers): the loader's column numbers then
count in ``fields`` order; null takes every column in the table's order. The record number that errors
name (``file:N``) is the row: the data row for Parquet and Arrow (from 1), the sheet's own row number for
Excel. These parsers read whole files themselves (``reads_paths``): the reader hands them a path, and they
feed the bytes they read to the fingerprint digest.
"""

from __future__ import annotations

import io as _stdio
import json
import math
from collections.abc import Iterator
from typing import Any

from xdpx import io
from xdpx.config.options import Option
from xdpx.data import parsers
from xdpx.data.errors import BadLine
from xdpx.data.parsing import JSON_FIELDS, JsonLinesParser, JsonValue, Parser
from xdpx.data.reading import NO_DIGEST
from xdpx.utils import optional

BATCH_ROWS = 4096
HASH_BLOCK = 1 << 20
STATE_FILE = "state.json"  # what save_to_disk writes beside the Arrow files of a split


def require(module: str, parser: str) -> Any:
    """Import an optional library, or stop with the one line naming the extra that installs it."""
    return optional.require(module, f"parser {parser!r}")


def is_dataset_folder(path: str) -> bool:
    """A folder that ``datasets.Dataset.save_to_disk`` wrote (one split: state.json and its Arrow files)."""
    return io.isdir(path) and io.exists(io.join(path, STATE_FILE))


def hash_file(path: str, digest: Any) -> None:
    if digest is NO_DIGEST:  # nothing to fingerprint: no extra pass over the file
        return
    with io.open(path, "rb") as f:
        while block := f.read(HASH_BLOCK):
            digest.update(block)


class CellError(str):
    """An Excel error cell (#DIV/0!, #N/A...): a bad record, never a text."""

    def __reduce__(self) -> tuple[object, ...]:
        return CellError, (str(self),)


def cell_column(value: Any, field: str) -> str:
    """A cell as a column (``field`` names it in messages: "column 'text'"): text as it is; a number or
    boolean as a :class:`JsonValue` (a label may be one, a text may not); an empty cell as a null one;
    anything else (dates, bytes, nested values) is a bad line."""
    if isinstance(value, CellError):
        raise BadLine(f"{field} holds the Excel error {value}: fix the cell (or its formula)")
    if isinstance(value, str):
        return value
    if value is None:
        return JsonValue("", "null", field, source="table")
    if isinstance(value, bool):
        return JsonValue("true" if value else "false", "boolean", field, source="table")
    if isinstance(value, int):
        return JsonValue(str(value), "number", field, source="table")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise BadLine(f"{field} is {value}: a missing value? Give a real value, or drop the row")
        # A whole number in a float column (an integer column with a missing value, Excel's numbers) reads
        # as that integer, so label 1 is '1' whichever way the table stored it.
        return JsonValue(str(int(value)) if value.is_integer() else repr(value), "number", field, source="table")
    kind = type(value).__name__
    raise BadLine(f"{field} holds a {kind} ({str(value)[:40]}), not a text or a number: convert the column to text")


def select_columns(available: list[str], fields: list[str] | None, where: str) -> list[str]:
    """The columns to read: ``fields`` (the last may be absent: an unlabelled file), else all. Stricter than
    JSON records: a whole table without a column is more likely a misnamed field than a missing label."""
    if fields is None:
        return list(available)
    missing = [f for f in fields if f not in available]
    if missing == fields[-1:] and len(fields) > 1:
        return list(fields[:-1])
    if missing:
        shown = ", ".join(repr(m) for m in missing)
        raise BadLine(f"column(s) {shown} of `fields` not in the file (its columns: {', '.join(available)}): fix "
                      "`fields`", where=where)
    return list(fields)


class TableParser(Parser):
    """Base of the table parsers: rows come as dicts; ``parse`` orders the cells by ``fields``."""

    options = [JSON_FIELDS]
    line_based = False
    reads_paths = True
    library = "pyarrow"

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        require(self.library, self.registered_name)  # type: ignore[attr-defined]  # before any work

    def path_records(self, path: str, digest: Any) -> Iterator[tuple[int, Any]]:
        raise NotImplementedError

    def parse(self, record: Any) -> list[str]:
        if isinstance(record, str):
            # A line, not a row: x-serve's requests and x-pred's text inputs to a run trained on a table give
            # a JSON object of the same columns ({"text": ..., "label": ...}), read as parser jsonl would.
            return JsonLinesParser(self.args).parse(record)
        return [cell_column(value, self.label(name)) for name, value in record.items()]

    def label(self, key: str) -> str:
        return f"column {key!r}"


def _arrow_rows(batches: Any, names: list[str], number: int, labels: dict[str, list[str]]) -> Iterator[tuple[int, Any]]:
    for batch in batches:
        columns = [batch.column(batch.schema.get_field_index(n)).to_pylist() for n in names]
        for row in zip(*columns):
            number += 1
            yield number, {n: _named(v, labels.get(n)) for n, v in zip(names, row)}


def _named(value: Any, names: list[str] | None) -> Any:
    """A ClassLabel integer as its name; -1 is datasets' "no label" (test splits): an empty cell."""
    if names is not None and isinstance(value, int) and not isinstance(value, bool):
        if value == -1:
            return None
        if 0 <= value < len(names):
            return names[value]
    return value


@parsers.register("parquet")
class ParquetParser(TableParser):
    """A Parquet file, streamed a record batch at a time (needs pyarrow: the [parquet] extra)."""

    def path_records(self, path: str, digest: Any) -> Iterator[tuple[int, Any]]:
        pq = require("pyarrow.parquet", "parquet")
        hash_file(path, digest)
        with io.open(path, "rb") as f:
            try:
                table = pq.ParquetFile(f)
            except Exception as e:  # pyarrow's ArrowInvalid and friends: not a Parquet file
                raise BadLine(f"not a Parquet file ({type(e).__name__}: {e})", where=path) from None
            names = select_columns(table.schema_arrow.names, self.args.fields, path)
            yield from _arrow_rows(table.iter_batches(batch_size=BATCH_ROWS, columns=names), names, 0, {})


@parsers.register("arrow")
class ArrowParser(TableParser):
    """A Hugging Face ``datasets`` split saved with ``save_to_disk`` (its folder: state.json and Arrow files,
    read in state.json's order), or one Arrow file. Read with pyarrow, without the datasets library."""

    options = [JSON_FIELDS,
               Option("class_names", bool, default=True,
                      doc="a ClassLabel column (integers with names in the dataset's features) gives its names "
                          "as labels; false: the integers")]

    def path_records(self, path: str, digest: Any) -> Iterator[tuple[int, Any]]:
        files = [path]
        if is_dataset_folder(path):
            with io.open(io.join(path, STATE_FILE)) as f:
                state = json.load(f)
            files = [io.join(path, entry["filename"]) for entry in state.get("_data_files", [])]
        done = 0  # rows are numbered across the shards of a split
        for file in files:
            for number, row in self._file_rows(file, digest, done):
                yield number, row
                done = number

    def _file_rows(self, path: str, digest: Any, number: int) -> Iterator[tuple[int, Any]]:
        pa = require("pyarrow", "arrow")
        hash_file(path, digest)
        with io.open(path, "rb") as f:
            try:
                reader = pa.ipc.open_stream(f)  # save_to_disk writes the streaming format
            except pa.ArrowInvalid:
                f.seek(0)
                try:
                    reader = pa.ipc.open_file(f)
                except pa.ArrowInvalid as e:
                    raise BadLine(f"not an Arrow file ({e})", where=path) from None
            names = select_columns(reader.schema.names, self.args.fields, path)
            labels = class_labels(reader.schema) if self.args.class_names else {}
            if isinstance(reader, pa.ipc.RecordBatchFileReader):
                batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
            else:
                batches = reader  # a stream reader yields its batches
            yield from _arrow_rows(batches, names, number, labels)


def class_labels(schema: Any) -> dict[str, list[str]]:
    """{column: class names} of the ClassLabel columns, from the features datasets keeps in the schema."""
    raw = (schema.metadata or {}).get(b"huggingface")
    if not raw:
        return {}
    try:
        features = json.loads(raw).get("info", {}).get("features", {})
    except ValueError:
        return {}
    return {name: list(spec["names"]) for name, spec in features.items()
            if isinstance(spec, dict) and spec.get("_type") == "ClassLabel" and spec.get("names")}


@parsers.register("excel")
class ExcelParser(TableParser):
    """One sheet of an Excel workbook (.xlsx; needs openpyxl: the [excel] extra). Without ``fields`` every
    column is read in order and the first row is data (``start_line: 1`` skips a header); with ``fields``
    the first row holds the column names. Empty rows are left out."""

    options = [Option("sheet_name", str, default=None, doc="the sheet to read; null: the first one"),
               Option("fields", list[str], default=None,
                      doc="names in the sheet's first (header) row of the columns to read, in column order for "
                          "the loader; null: no header row, every column in order")]
    library = "openpyxl"

    def path_records(self, path: str, digest: Any) -> Iterator[tuple[int, Any]]:
        openpyxl = require("openpyxl", "excel")
        with io.open(path, "rb") as f:
            data = f.read()  # a workbook is a zip file: read whole (sheets are capped at ~1M rows)
        digest.update(data)
        try:
            book = openpyxl.load_workbook(_stdio.BytesIO(data), read_only=True, data_only=True)
        except Exception as e:  # zipfile.BadZipFile, KeyError, InvalidFileException...
            raise BadLine(f"not an .xlsx workbook ({type(e).__name__}: {e}); an old .xls? Save it as .xlsx",
                          where=path) from None
        try:
            sheet_name = self.args.sheet_name or book.sheetnames[0]
            if sheet_name not in book.sheetnames:
                raise BadLine(f"no sheet {sheet_name!r} (sheets: {', '.join(book.sheetnames)}): fix sheet_name",
                              where=path)
            yield from self._rows(book[sheet_name], path, sheet_name)
        finally:
            book.close()

    def _rows(self, sheet: Any, path: str, sheet_name: str) -> Iterator[tuple[int, Any]]:
        # lazy: optional package openpyxl (excel extra)
        from openpyxl.utils import get_column_letter as letter

        rows = sheet.iter_rows()
        positions: list[int] | None = None
        names: list[str] = []
        if self.args.fields is not None:
            header = next(rows, ())
            header_names = [str(c.value).strip() if c.value is not None else "" for c in header]
            names = select_columns([h for h in header_names if h], self.args.fields, f"{path} (sheet {sheet_name!r})")
            positions = [header_names.index(n) for n in names]
        for cells in rows:
            values = [CellError(c.value) if getattr(c, "data_type", None) == "e" else c.value for c in cells]
            if all(v is None or v == "" for v in values):
                continue
            number = next((c.row for c in cells if getattr(c, "row", None)), None)
            if positions is None:
                yield number, {letter(i + 1): v for i, v in enumerate(values)}
            else:
                yield number, {n: values[p] if p < len(values) else None for n, p in zip(names, positions)}

    def label(self, key: str) -> str:
        # Without fields the keys are the sheet's column letters: "column B", as Excel shows it.
        return f"column {key}" if self.args.fields is None else f"column {key!r}"
