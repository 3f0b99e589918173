"""Where x-eval / x-pred read data: a split of data_dir, a raw text file, a table file (Parquet, Excel
.xlsx, a ``datasets`` save_to_disk folder or an Arrow file) or an SQL table.

A raw source yields chunks ``(where, layout, [(record number, record)...])`` as x-prepro's reader does
(xdpx/data/reading.py): a record is a raw line (bytes) for text files, the row's columns (strings) for
tables. A run that declared ``fields`` (parser jsonl, parquet, excel...) gets a table's columns by those
names, in fields order, as x-prepro read its training tables; otherwise columns are taken in the table's
order (or the order of ``columns=``), so the loader finds the text(s) and the label at the same column
numbers as in its training files. Either way x-pred writes back all of the row's columns, in table order.

SQL tables are read through SQLAlchemy (``pip install 'xdpx[sql]'``): ``sqlite:///path.db?table=name``,
``postgresql://user@host:port/db?table=name``; ``&columns=a,b`` picks and orders columns. Rows are read in
primary-key order when the table has one (an SQL table has no order of its own), in chunks. Parquet files
are read with pyarrow (``pip install 'xdpx[parquet]'``), in row order, a record batch at a time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlencode

from xdpx import io
from xdpx.config.options import Args
from xdpx.data import parsers
from xdpx.data.errors import BadLine
from xdpx.data.reading import NO_DIGEST, iter_chunks, new_digest
from xdpx.data.tables import is_dataset_folder, select_columns
from xdpx.errors import UserError
from xdpx.io.credentials import redact, unmask
from xdpx.utils.optional import PACKAGES, install_line, require

CHUNK_ROWS = 4096
SQL_DIALECTS = ("sqlite", "postgresql", "postgres", "mysql", "mariadb", "mssql", "oracle")

Chunk = tuple[str, Any, list[tuple[int, Any]]]  # (where, xdpx.data.loading.Layout, records)


def is_sql_url(name: str) -> bool:
    scheme = name.split("://", 1)[0] if "://" in name else ""
    return scheme.split("+")[0].lower() in SQL_DIALECTS


def cell(value: Any) -> str:
    """A table cell as the text a loader reads (NULL -> empty, numbers as written)."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # 1.0 read from a float column is the label "1" of a text file
    return value if isinstance(value, str) else str(value)


class RawSource:
    """A raw input; ``chunks(parser, loader)`` streams it, ``column_names`` names a table's columns."""

    name: str
    column_names: list[str] | None = None

    def chunks(self, parser: Any, loader: Any) -> Iterator[Chunk]:
        raise NotImplementedError

    @staticmethod
    def _table_chunks(where: str, rows: Iterator[tuple[int, list[str]]], loader: Any) -> Iterator[Chunk]:
        layout = None
        chunk: list[tuple[int, Any]] = []
        for number, row in rows:
            if layout is None:
                layout = loader.layout_of(row, number)
            chunk.append((number, row))
            if len(chunk) >= CHUNK_ROWS:
                yield where, layout, chunk
                chunk = []
        if chunk:
            yield where, layout, chunk


class TextSource(RawSource):
    """A raw text file in the run's training format, read with the run's parser (any xdpx.io path)."""

    def __init__(self, path: str) -> None:
        self.name = path

    def chunks(self, parser: Any, loader: Any) -> Iterator[Chunk]:
        counts: Counter[str] = Counter()
        if getattr(parser, "reads_paths", False):
            # A run trained on a table (parser parquet, excel, arrow) reads a text input as JSON lines of the
            # same columns ({"text": ..., "label": ...}): its parser's parse() takes such a line.
            parser = parsers.get("jsonl")(parser.args)
        yield from iter_chunks([self.name], parser, loader, 0, False, new_digest(), counts)


class Row(list):
    """A table row as the loader reads it (the cells of the run's ``fields``, in fields order), carrying
    ``origin``: all of the row's cells in the table's order, which x-pred writes back (concat_origin)."""

    origin: list[str]


def pick_columns(where: str, names: list[str], fields: list[str] | None) -> list[int] | None:
    """Positions (in ``names``) of the run's ``fields``, by name; None: every column in order. As x-prepro
    reads a table: the last field may be absent (an unlabelled table), any other missing one is an error."""
    if not fields:
        return None
    try:
        chosen = select_columns(names, list(fields), where)
    except BadLine:
        missing = ", ".join(repr(f) for f in fields if f not in names)
        raise UserError(f"{where}: no column(s) {missing} of the run's `fields` {list(fields)} (its columns: "
                        f"{', '.join(names)}): rename them in the table (or pick them: ?columns= for SQL)") from None
    return [names.index(name) for name in chosen]


def picked_row(cells: list[str], positions: list[int] | None) -> list[str]:
    if positions is None:
        return cells
    row = Row(cells[p] for p in positions)
    row.origin = cells
    return row


class TableSource(RawSource):
    """A table file (Parquet, an Excel .xlsx sheet, a ``datasets`` save_to_disk folder or an Arrow file),
    read with the parsers of x-prepro (xdpx/data/tables.py). With the run's ``fields`` the loader gets those
    columns by name, as in training; without, every column in the table's order. An Excel sheet has a
    header row of column names when the run declares ``fields`` (as x-prepro reads it), none otherwise."""

    def __init__(self, path: str, kind: str, run_args: Any = None) -> None:
        get = run_args.get if run_args is not None else (lambda key, default=None: default)
        self.name, self.kind, self.fields = path, kind, get("fields")
        same_parser = get("parser") == kind  # sheet_name / class_names of a run trained on this kind of table
        values = {"fields": None, "sheet_name": get("sheet_name") if same_parser else None,
                  "class_names": get("class_names", True) if same_parser else True}
        self.parser = parsers.get(kind)(Args(values, {}, set(), {}))
        self.positions: list[int] | None = None
        if kind == "parquet":  # the schema gives the names at once: a missing column is found by --dry
            pq = require("pyarrow.parquet", f"reading {path}")
            with io.open(path, "rb") as f:
                self.column_names = list(pq.ParquetFile(f).schema_arrow.names)
            self.positions = pick_columns(path, self.column_names, self.fields)

    def chunks(self, parser: Any, loader: Any) -> Iterator[Chunk]:
        yield from self._table_chunks(self.name, self._rows(), loader)

    def _rows(self) -> Iterator[tuple[int, list[str]]]:
        header = self.kind == "excel" and bool(self.fields)
        try:
            for number, record in self.parser.path_records(self.name, NO_DIGEST):
                cells = [cell(v) for v in record.values()]
                if self.column_names is None:
                    # Arrow and Excel name their columns as the first record comes (a sheet: its header row)
                    self.column_names = [c or key for c, key in zip(cells, record)] if header else list(record)
                    self.positions = pick_columns(self.name, self.column_names, self.fields)
                    if header:
                        continue
                cells += [""] * (len(self.column_names) - len(cells))  # a sheet row shorter than the header
                yield number, picked_row(cells, self.positions)
        except BadLine as e:  # not a table of this kind, no such sheet: the file's own one-line message
            raise UserError(str(e) if e.where else f"{self.name}: {e}") from None


def split_sql_url(url: str) -> tuple[str, str, list[str] | None]:
    """``sqlite:///a.db?table=t&columns=x,y`` -> ('sqlite:///a.db', 't', ['x', 'y'])."""
    base, _, query_string = url.partition("?")  # not urlunsplit: it turns sqlite://// into sqlite://
    query = parse_qsl(query_string, keep_blank_values=True)
    ours = {k: v for k, v in query if k in ("table", "columns")}
    rest = [(k, v) for k, v in query if k not in ("table", "columns")]
    if not ours.get("table"):
        raise UserError(f"{redact(url)}: name the table, e.g. sqlite:///data.db?table=reviews "
                        "(and optionally &columns=text,label)")
    columns = [c.strip() for c in ours["columns"].split(",") if c.strip()] if ours.get("columns") else None
    return base + (f"?{urlencode(rest)}" if rest else ""), ours["table"], columns


class SqlSource(RawSource):
    """An SQL table through SQLAlchemy; rows in primary-key order when there is a key."""

    def __init__(self, url: str, fields: list[str] | None = None) -> None:
        self.name = redact(url)  # what messages and outputs show; the password is for the engine only
        # unmask: a URL read back masked connects with the password libpq (or the driver) finds itself
        self.url, self.table_name, self.selected = split_sql_url(unmask(url))
        sqlalchemy = require("sqlalchemy", f"reading {self.name}")
        try:
            self.engine = sqlalchemy.create_engine(self.url)
            self.table = sqlalchemy.Table(self.table_name, sqlalchemy.MetaData(), autoload_with=self.engine)
        except sqlalchemy.exc.NoSuchTableError:
            raise UserError(f"{self.name}: no table {self.table_name!r}") from None
        except ModuleNotFoundError as e:  # the driver the URL names (postgresql: psycopg, in the [sql] extra)
            driver = (e.name or "the driver").split(".")[0]
            fix = install_line(driver) if driver in PACKAGES else f"pip install {driver}"
            raise UserError(f"{self.name}: the database driver {driver} is not installed: {fix}") from None
        except sqlalchemy.exc.SQLAlchemyError as e:
            raise UserError(f"{self.name}: cannot open the table ({type(e).__name__}: {redact(str(e))})") from None
        names = [c.name for c in self.table.columns]
        unknown = [c for c in self.selected or [] if c not in names]
        if unknown:
            raise UserError(f"{self.name}: table {self.table_name!r} has no column(s) {unknown}; it has {names}")
        self.column_names = list(self.selected or names)
        # columns= is the user's choice for this table; without it, the run's fields pick columns by name
        self.positions = None if self.selected else pick_columns(self.name, self.column_names, fields)

    def chunks(self, parser: Any, loader: Any) -> Iterator[Chunk]:
        sqlalchemy = require("sqlalchemy", f"reading {self.name}")
        columns = [self.table.columns[name] for name in self.column_names]
        query = sqlalchemy.select(*columns).order_by(*self.table.primary_key.columns)

        def rows() -> Iterator[tuple[int, list[str]]]:
            number = 0
            with self.engine.connect() as connection:
                result = connection.execution_options(stream_results=True).execute(query)
                while batch := result.fetchmany(CHUNK_ROWS):
                    for row in batch:
                        number += 1
                        yield number, picked_row([cell(v) for v in row], self.positions)

        try:
            yield from self._table_chunks(self.name, rows(), loader)
        finally:
            self.engine.dispose()


def table_kind(name: str) -> str | None:
    """The table parser (xdpx/data/tables.py) that reads the file or folder ``name``, if it is a table."""
    lower = name.lower()
    if lower.endswith((".parquet", ".pq")):
        return "parquet"
    if lower.endswith(".xlsx"):
        return "excel"
    if lower.endswith(".arrow") or is_dataset_folder(name):
        return "arrow"
    return None


def open_raw(name: str, run_args: Any = None) -> RawSource | None:
    """The raw source ``name`` names (SQL URL, table file, datasets folder, text file), or None. With
    ``run_args`` (the run's options) a table's columns are picked by the run's ``fields``."""
    fields = run_args.get("fields") if run_args is not None else None
    if is_sql_url(name):
        return SqlSource(name, fields)
    if not io.exists(name):
        return None
    kind = table_kind(name)
    if kind is not None:
        return TableSource(name, kind, run_args)
    return TextSource(name)
