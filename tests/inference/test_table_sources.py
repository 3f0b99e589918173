"""x-pred / x-eval on table inputs pick columns by the run's `fields` names, as x-prepro did for its training
tables: a run trained with parser parquet predicts a Parquet file, an .xlsx sheet or a datasets folder whose
columns come in another order exactly as it predicts the same rows given as JSON lines; the output keeps the
input's own columns in the input's order."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from inference_helpers import SAMPLE, train_run, write_json

from xdpx.cli import run_chain

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

REVIEWS = SAMPLE / "reviews"


def rows_of(split: str) -> list[tuple[str, str]]:
    lines = (REVIEWS / f"{split}.txt").read_text(encoding="utf-8").splitlines()
    return [tuple(line.split("\t")) for line in lines]  # type: ignore[misc]


def read_tsv(path: Path) -> list[list[str]]:
    with open(path, encoding="utf-8") as f:
        return list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


@pytest.fixture(scope="module")
def parquet_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cls_cnn run prepared with parser parquet from files whose columns are [label, text]."""
    root = tmp_path_factory.mktemp("parquet_run")
    source = root / "source"
    source.mkdir()
    for split in ("train", "dev"):
        rows = rows_of(split)
        pq.write_table(pa.table({"label": [r[1] for r in rows], "text": [r[0] for r in rows]}),
                       source / f"{split}.parquet")
    prepro = {"data_source": str(source), "data_files": "*.parquet", "parser": "parquet", "fields": ["text", "label"],
              "data_dir": str(root / "data"), "processor": "single", "loader": "single", "tokenizer": "char_zh",
              "max_len": 64, "threshold": 1, "workers": 1}
    assert run_chain(["x-prepro", str(write_json(root / "prepro.hjson", prepro))]) == 0
    return train_run(root, root / "data")


def write_inputs(folder: Path) -> dict[str, Path]:
    """The test rows as JSON lines (the reference), and as tables whose columns are in other orders."""
    import datasets
    import openpyxl

    rows = rows_of("test")
    texts, labels = [r[0] for r in rows], [r[1] for r in rows]
    paths = {"jsonl": folder / "test.jsonl", "parquet": folder / "test.parquet", "xlsx": folder / "test.xlsx",
             "arrow": folder / "saved"}
    paths["jsonl"].write_text("".join(json.dumps({"text": t, "label": y}, ensure_ascii=False) + "\n"
                                      for t, y in rows), encoding="utf-8")
    pq.write_table(pa.table({"id": list(range(len(rows))), "label": labels, "text": texts}), paths["parquet"])
    book = openpyxl.Workbook()
    book.active.append(["label", "id", "text"])
    for i, (text, label) in enumerate(rows):
        book.active.append([label, i, text])
    book.save(paths["xlsx"])
    datasets.Dataset.from_dict({"label": labels, "text": texts}).save_to_disk(str(paths["arrow"]))
    return paths


def test_tables_predict_by_column_name_like_json_lines(parquet_run: Path, tmp_path: Path) -> None:
    inputs = write_inputs(tmp_path)
    outputs = {kind: tmp_path / f"{kind}.pred.tsv" for kind in inputs}
    config = {"save_dir": str(parquet_run), "predict_file_map": {str(inputs[k]): str(outputs[k]) for k in inputs}}
    assert run_chain(["x-pred", str(write_json(tmp_path / "pred.hjson", config))]) == 0

    tables = {kind: read_tsv(path) for kind, path in outputs.items()}
    reference = [row[2:] for row in tables["jsonl"][1:]]
    assert tables["jsonl"][0] == ["text", "label", "predict", "prob", "prob_neg", "prob_pos"]
    assert len(reference) == 60 and len({row[-1] for row in reference}) > 10  # probabilities differ by text
    for kind in ("parquet", "xlsx", "arrow"):
        assert [row[-4:] for row in tables[kind][1:]] == reference, kind

    # the output keeps the input's columns, in the input's order
    rows = rows_of("test")
    assert tables["parquet"][0][:3] == ["id", "label", "text"]
    assert [r[:3] for r in tables["parquet"][1:]] == [[str(i), y, t] for i, (t, y) in enumerate(rows)]
    assert tables["xlsx"][0][:3] == ["label", "id", "text"]
    assert [r[:3] for r in tables["xlsx"][1:]] == [[y, str(i), t] for i, (t, y) in enumerate(rows)]
    assert tables["arrow"][0][:2] == ["label", "text"]

    # x-eval scores the Parquet file as the JSON lines
    scores = tmp_path / "scores.tsv"
    config = {"save_dir": str(parquet_run), "valid_subset": [str(inputs["jsonl"]), str(inputs["parquet"])],
              "save_to_file": str(scores)}
    assert run_chain(["x-eval", str(write_json(tmp_path / "eval.hjson", config))]) == 0
    _, from_jsonl, from_parquet = read_tsv(scores)
    assert from_parquet[2:] == from_jsonl[2:]


def test_unlabelled_table_and_missing_column(parquet_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                             ) -> None:
    rows = rows_of("test")[:8]
    unlabelled = tmp_path / "unlabelled.parquet"  # the last field (label) may be absent, as in x-prepro
    pq.write_table(pa.table({"note": ["x"] * 8, "text": [r[0] for r in rows]}), unlabelled)
    out = tmp_path / "unlabelled.tsv"
    config = {"save_dir": str(parquet_run), "predict_file_map": {str(unlabelled): str(out)}}
    assert run_chain(["x-pred", str(write_json(tmp_path / "pred.hjson", config))]) == 0
    table = read_tsv(out)
    assert table[0][:2] == ["note", "text"] and [r[1] for r in table[1:]] == [r[0] for r in rows]

    misnamed = tmp_path / "misnamed.parquet"
    pq.write_table(pa.table({"review": [r[0] for r in rows], "label": [r[1] for r in rows]}), misnamed)
    for command, key, value in (("x-pred", "predict_file_map", {str(misnamed): str(tmp_path / "o.tsv")}),
                                ("x-eval", "valid_subset", str(misnamed))):
        config = {"save_dir": str(parquet_run), key: value}
        assert run_chain([command, str(write_json(tmp_path / "c.hjson", config))]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1, err
        assert (f"{misnamed}: no column(s) 'text' of the run's `fields` ['text', 'label'] (its columns: review, "
                "label)") in err[0]
    assert not (tmp_path / "o.tsv").exists()


def test_sql_table_without_columns_picks_the_fields(parquet_run: Path, tmp_path: Path) -> None:
    sqlalchemy = pytest.importorskip("sqlalchemy")
    rows = rows_of("test")[:12]
    url = f"sqlite:///{tmp_path / 'r.db'}"
    engine = sqlalchemy.create_engine(url)
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE reviews (id INTEGER PRIMARY KEY, label TEXT, text TEXT)")
        connection.exec_driver_sql("INSERT INTO reviews VALUES (?, ?, ?)", [(i, y, t) for i, (t, y) in enumerate(rows)])
    engine.dispose()
    jsonl = tmp_path / "test.jsonl"
    jsonl.write_text("".join(json.dumps({"text": t, "label": y}, ensure_ascii=False) + "\n" for t, y in rows),
                     encoding="utf-8")
    config = {"save_dir": str(parquet_run), "predict_file_map": {
        f"{url}?table=reviews": str(tmp_path / "sql.tsv"), str(jsonl): str(tmp_path / "jsonl.tsv")}}
    assert run_chain(["x-pred", str(write_json(tmp_path / "pred.hjson", config))]) == 0
    table, reference = read_tsv(tmp_path / "sql.tsv"), read_tsv(tmp_path / "jsonl.tsv")
    assert table[0][:3] == ["id", "label", "text"] and len(table) == 13
    assert [r[-4:] for r in table[1:]] == [r[-4:] for r in reference[1:]]
