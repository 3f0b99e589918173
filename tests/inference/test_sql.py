"""SQL tables (SQLite, and a real PostgreSQL server) predict and score like the same rows in a text file."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from inference_helpers import SAMPLE, write_json

from xdpx.cli import run_chain

sqlalchemy = pytest.importorskip("sqlalchemy")

TEST_TXT = SAMPLE / "reviews/test.txt"


def fill_table(url: str, name: str, rows: list[tuple[str, str]]) -> None:
    """A table (id primary key, review, label) holding ``rows``, inserted in reverse: the id gives the order."""
    engine = sqlalchemy.create_engine(url)
    metadata = sqlalchemy.MetaData()
    table = sqlalchemy.Table(name, metadata,
                             sqlalchemy.Column("id", sqlalchemy.Integer, primary_key=True, autoincrement=False),
                             sqlalchemy.Column("review", sqlalchemy.Text), sqlalchemy.Column("label", sqlalchemy.Text))
    metadata.drop_all(engine)
    metadata.create_all(engine)
    with engine.begin() as connection:
        connection.execute(table.insert(), [{"id": i, "review": t, "label": label}
                                            for i, (t, label) in reversed(list(enumerate(rows)))])
    engine.dispose()


def read_rows(path: Path) -> list[list[str]]:
    with open(path, encoding="utf-8") as f:
        return list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def predictions(path: Path) -> list[list[str]]:
    return [row[-4:] for row in read_rows(path)[1:]]


def rows_of_text_file() -> list[tuple[str, str]]:
    return [tuple(line.split("\t")) for line in TEST_TXT.read_text(encoding="utf-8").splitlines()]


def check_table_like_text_file(run: Path, url: str, tmp_path: Path) -> None:
    rows = rows_of_text_file()
    text_out, table_out = tmp_path / "text.tsv", tmp_path / "table.tsv"
    table_url = f"{url}?table=reviews&columns=review,label"
    config = write_json(tmp_path / "pred.hjson", {"save_dir": str(run), "predict_file_map": {
        str(TEST_TXT): str(text_out), table_url: str(table_out)}})
    assert run_chain(["x-pred", str(config)]) == 0
    assert predictions(table_out) == predictions(text_out)
    assert len(predictions(text_out)) == len(rows) == 60
    table_rows = read_rows(table_out)
    assert table_rows[0][:2] == ["review", "label"]
    assert [tuple(r[:2]) for r in table_rows[1:]] == rows
    # x-eval scores the table like the file
    scores = tmp_path / "scores.tsv"
    config = write_json(tmp_path / "eval.hjson", {"save_dir": str(run), "valid_subset": [str(TEST_TXT), table_url],
                                                  "save_to_file": str(scores)})
    assert run_chain(["x-eval", str(config)]) == 0
    _, from_text, from_table = read_rows(scores)
    assert from_text[2:] == from_table[2:]


def test_sqlite_table_predicts_like_the_text_file(cnn_run: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'reviews.db'}"
    fill_table(url, "reviews", rows_of_text_file())
    check_table_like_text_file(cnn_run, url, tmp_path)


def test_postgresql_table_predicts_like_the_text_file(postgres_url: str, cnn_run: Path, tmp_path: Path) -> None:
    fill_table(postgres_url, "reviews", rows_of_text_file())
    check_table_like_text_file(cnn_run, postgres_url, tmp_path)


def test_sql_url_errors(cnn_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'reviews.db'}"
    fill_table(url, "reviews", rows_of_text_file()[:3])
    cases = {
        url: "name the table, e.g. sqlite:///data.db?table=reviews",
        f"{url}?table=nope": "no table 'nope'",
        f"{url}?table=reviews&columns=review,stars": "no column(s) ['stars']",
    }
    for source, message in cases.items():
        config = write_json(tmp_path / "pred.hjson", {"save_dir": str(cnn_run),
                                                      "predict_file_map": {source: str(tmp_path / "o.tsv")}})
        assert run_chain(["x-pred", str(config)]) == 1
        assert message in capsys.readouterr().err


def test_passwords_never_shown() -> None:
    from xdpx.inference.sources import split_sql_url
    from xdpx.io import redact

    url = "postgresql://reader:s3cret@db.example:5432/shop?table=reviews&columns=text,label&sslmode=require"
    assert "s3cret" not in redact(url) and "reader:***@db.example" in redact(url)
    assert split_sql_url(url) == ("postgresql://reader:s3cret@db.example:5432/shop?sslmode=require", "reviews",
                                  ["text", "label"])


@pytest.mark.parametrize("required", [True, False])
def test_missing_postgresql_fails_in_ci_and_skips_elsewhere(required: bool, tmp_path: Path) -> None:
    """CI sets XDPX_REQUIRE_POSTGRES=1: there a machine without PostgreSQL fails the test, never skips it."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "XDPX_PG_BIN": str(tmp_path / "no-postgres-here")}
    env.pop("XDPX_REQUIRE_POSTGRES", None)
    if required:
        env["XDPX_REQUIRE_POSTGRES"] = "1"
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-rs",
                             f"{__file__}::test_postgresql_table_predicts_like_the_text_file"],
                            capture_output=True, text=True, env=env, cwd=Path(__file__).parent, timeout=300)
    if required:
        assert result.returncode == 1 and "ERROR at setup of test_postgresql_table" in result.stdout
        assert "XDPX_REQUIRE_POSTGRES=1 but initdb/pg_ctl are not installed" in result.stdout
    else:
        assert result.returncode == 0 and "SKIPPED [1]" in result.stdout
        assert "initdb/pg_ctl are not installed (apt-get install -y postgresql)" in result.stdout
