"""Where x-eval / x-pred read data: a split of data_dir, a raw text file, a Parquet file or an SQL table.

A raw source yields chunks ``(where, layout, [(record number, record)...])`` as x-prepro's reader does
(xdpx/data/reading.py): a record is a raw line (bytes) for text files, the row's columns (strings) for
tables. Columns of a table are taken in the table's order (or the order of ``columns=``), so the run's
loader finds the text(s) and the label at the same column numbers as in its training files.

SQL tables are read through SQLAlchemy (``pip install -e '.[sql]'``): ``sqlite:///path.db?table=name``,
``postgresql://user@host:port/db?table=name``; ``&columns=a,b`` picks and orders columns. Rows are read in
primary-key order when the table has one (an SQL table has no order of its own), in chunks. Parquet files
are read with pyarrow (``pip install -e '.[parquet]'``), in row order, a record batch at a time.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlencode

from xdpx import io
from xdpx.errors import UserError
from xdpx.io.credentials import redact, unmask

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
    def _table_chunks(where: str, rows: Iterator[list[str]], loader: Any) -> Iterator[Chunk]:
        layout = None
        chunk: list[tuple[int, Any]] = []
        for number, row in enumerate(rows, 1):
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
        from collections import Counter

        from xdpx.data.reading import iter_chunks, new_digest

        counts: Counter[str] = Counter()
        yield from iter_chunks([self.name], parser, loader, 0, False, new_digest(), counts)


class ParquetSource(RawSource):
    """A Parquet file: every row is a record whose columns are the file's columns in order."""

    def __init__(self, path: str) -> None:
        self.name = path
        pq = _import("pyarrow.parquet", "parquet")
        with io.open(path, "rb") as f:
            self.column_names = list(pq.ParquetFile(f).schema_arrow.names)

    def chunks(self, parser: Any, loader: Any) -> Iterator[Chunk]:
        pq = _import("pyarrow.parquet", "parquet")

        def rows() -> Iterator[list[str]]:
            with io.open(self.name, "rb") as f:
                for batch in pq.ParquetFile(f).iter_batches(batch_size=CHUNK_ROWS):
                    columns = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
                    for values in zip(*columns):
                        yield [cell(v) for v in values]

        yield from self._table_chunks(self.name, rows(), loader)


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

    def __init__(self, url: str) -> None:
        self.name = redact(url)  # what messages and outputs show; the password is for the engine only
        # unmask: a URL read back masked connects with the password libpq (or the driver) finds itself
        self.url, self.table_name, self.selected = split_sql_url(unmask(url))
        sqlalchemy = _import("sqlalchemy", "sql")
        try:
            self.engine = sqlalchemy.create_engine(self.url)
            self.table = sqlalchemy.Table(self.table_name, sqlalchemy.MetaData(), autoload_with=self.engine)
        except sqlalchemy.exc.NoSuchTableError:
            raise UserError(f"{self.name}: no table {self.table_name!r}") from None
        except ModuleNotFoundError as e:
            raise UserError(f"{self.name}: the database driver is missing ({e}): pip install -e '.[sql]'") from None
        except sqlalchemy.exc.SQLAlchemyError as e:
            raise UserError(f"{self.name}: cannot open the table ({type(e).__name__}: {redact(str(e))})") from None
        names = [c.name for c in self.table.columns]
        unknown = [c for c in self.selected or [] if c not in names]
        if unknown:
            raise UserError(f"{self.name}: table {self.table_name!r} has no column(s) {unknown}; it has {names}")
        self.column_names = list(self.selected or names)

    def chunks(self, parser: Any, loader: Any) -> Iterator[Chunk]:
        sqlalchemy = _import("sqlalchemy", "sql")
        columns = [self.table.columns[name] for name in self.column_names]
        query = sqlalchemy.select(*columns).order_by(*self.table.primary_key.columns)

        def rows() -> Iterator[list[str]]:
            with self.engine.connect() as connection:
                result = connection.execution_options(stream_results=True).execute(query)
                while batch := result.fetchmany(CHUNK_ROWS):
                    for row in batch:
                        yield [cell(v) for v in row]

        try:
            yield from self._table_chunks(self.name, rows(), loader)
        finally:
            self.engine.dispose()


def _import(module: str, extra: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise UserError(f"reading this input needs {module.split('.')[0]}: pip install -e '.[{extra}]'") from None


def open_raw(name: str) -> RawSource | None:
    """The raw source ``name`` names (SQL URL, .parquet, existing file), or None."""
    if is_sql_url(name):
        return SqlSource(name)
    if not io.exists(name):
        return None
    if name.lower().endswith((".parquet", ".pq")):
        return ParquetSource(name)
    return TextSource(name)
