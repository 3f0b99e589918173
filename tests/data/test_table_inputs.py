"""x-prepro from tables: Parquet, Excel (.xlsx) and Hugging Face datasets folders (save_to_disk) give the
same binaries as the text file they were made from; bad cells and missing columns name file, row, column."""

from __future__ import annotations

import subprocess
import sys

import hjson
import openpyxl
import pyarrow as pa
import pyarrow.parquet as pq
from data_helpers import SAMPLES, prepro, split_bytes, write_lines

from xdpx.cli import EXIT_FAILED

BASIC = dict(processor="single", loader="single", tokenizer="char_zh", max_len=64)
REVIEWS = SAMPLES / "reviews"


def rows_of(split):
    """(text, label) rows of the committed reviews sample."""
    return [tuple(line.split("\t")) for line in (REVIEWS / f"{split}.txt").read_text(encoding="utf-8").splitlines()]


def write_parquet(path, rows, **extra):
    # label first: the columns are chosen by name (fields), not by their place in the file
    columns = {"label": [r[1] for r in rows], "text": [r[0] for r in rows], **extra}
    pq.write_table(pa.table(columns), path, row_group_size=50)  # several row groups and batches


def write_xlsx(path, rows, header=("text", "label"), sheet="reviews"):
    book = openpyxl.Workbook()
    book.active.title = "other"
    sheet = book.create_sheet(sheet)
    if header:
        sheet.append(list(header))
    for row in rows:
        sheet.append(list(row))
    book.save(path)


def text_baseline(tmp_path):
    out = tmp_path / "from_text"
    assert prepro(tmp_path, name="text", data_source=str(REVIEWS), data_files=["train.txt", "dev.txt"],
                  data_dir=str(out), **BASIC) == 0
    return split_bytes(out)


def test_parquet_excel_and_datasets_folder_give_the_bytes_of_the_text_input(tmp_path, source):
    import datasets

    baseline = text_baseline(tmp_path)
    assert len(baseline) == 10 and "dev.tokens.bin" in baseline  # 4 files a split; vocab; target map
    for split in ("train", "dev"):
        write_parquet(source / f"{split}.parquet", rows_of(split))
        write_xlsx(source / f"{split}.xlsx", rows_of(split))
    saved = tmp_path / "saved"
    datasets.DatasetDict({split: datasets.Dataset.from_dict(
        {"text": [r[0] for r in rows_of(split)], "label": [r[1] for r in rows_of(split)]})
        for split in ("train", "dev")}).save_to_disk(str(saved))
    runs = {
        "parquet": dict(data_source=str(source), data_files="*.parquet", parser="parquet", fields=["text", "label"]),
        "excel": dict(data_source=str(source), data_files="*.xlsx", parser="excel", sheet_name="reviews",
                      fields=["text", "label"]),
        "arrow": dict(data_source=str(saved), data_files=["train", "dev"], parser="arrow", workers=2),  # rows pickled
    }
    for name, options in runs.items():
        out = tmp_path / name
        assert prepro(tmp_path, name=name, data_dir=str(out), **options, **BASIC) == 0, name
        assert split_bytes(out) == baseline, name
        meta = hjson.loads((out / "meta.hjson").read_text())
        assert meta["data_size"] == {"train": 240, "dev": 60} and meta["parser"] == name


def test_class_labels_of_a_datasets_folder_become_their_names(tmp_path):
    import datasets

    rows = rows_of("train")
    features = datasets.Features({"text": datasets.Value("string"),
                                  "label": datasets.ClassLabel(names=["neg", "pos"])})
    saved = tmp_path / "saved"
    datasets.Dataset.from_dict({"text": [r[0] for r in rows], "label": [["neg", "pos"].index(r[1]) for r in rows]},
                               features=features).save_to_disk(str(saved), num_shards=3)  # order across shards
    assert prepro(tmp_path, name="a", data_source=str(saved), data_files={".": "train"}, parser="arrow",
                  data_dir=str(tmp_path / "names"), **BASIC) == 0
    assert prepro(tmp_path, name="b", data_source=str(REVIEWS), data_files="train.txt",
                  data_dir=str(tmp_path / "text"), **BASIC) == 0
    assert split_bytes(tmp_path / "names") == split_bytes(tmp_path / "text")
    assert prepro(tmp_path, name="c", data_source=str(saved), data_files={".": "train"}, parser="arrow",
                  class_names=False, data_dir=str(tmp_path / "ints"), **BASIC) == 0
    assert sorted((tmp_path / "ints" / "target_map.txt").read_text().split()) == ["0", "1"]


def test_a_missing_column_names_the_file_and_the_column(tmp_path, source, capsys):
    write_parquet(source / "train.parquet", rows_of("dev"))
    assert prepro(tmp_path, data_source=str(source), data_files="*.parquet", parser="parquet",
                  fields=["review", "label"], data_dir=str(tmp_path / "out"), **BASIC) == EXIT_FAILED
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "train.parquet: column(s) 'review' of `fields` not in the file (its columns: label, " \
        "text)" in err[0]
    write_xlsx(source / "train.xlsx", rows_of("dev"), header=("text", "class"))
    assert prepro(tmp_path, data_source=str(source), data_files="*.xlsx", parser="excel", sheet_name="reviews",
                  fields=["text", "label", "id"], data_dir=str(tmp_path / "out"), **BASIC) == EXIT_FAILED
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "train.xlsx (sheet 'reviews'): column(s) 'label', 'id' of `fields` not in the file" in err[0]
    assert not (tmp_path / "out").exists()


def test_bad_cells_stop_with_file_row_and_column(tmp_path, source, capsys):
    rows = rows_of("dev")[:20]
    texts = [r[0] for r in rows]
    texts[6] = None  # a missing text on row 7
    pq.write_table(pa.table({"text": texts, "label": [r[1] for r in rows]}), source / "train.parquet")
    assert prepro(tmp_path, data_source=str(source), data_files="*.parquet", parser="parquet",
                  fields=["text", "label"], data_dir=str(tmp_path / "out"), **BASIC) == EXIT_FAILED
    assert "train.parquet:7: column 'text' is empty, not a text" in capsys.readouterr().err
    book_rows = [list(r) for r in rows]
    book_rows[3][0] = 42  # a number where the text belongs: sheet row 5 (row 1 is the header)
    book_rows[9][1] = "=1/0"  # an error cell: sheet row 11
    write_xlsx(source / "train.xlsx", book_rows)
    _cache_error_value(source / "train.xlsx", "B11", "#DIV/0!")
    assert prepro(tmp_path, data_source=str(source), data_files="*.xlsx", parser="excel", sheet_name="reviews",
                  fields=["text", "label"], data_dir=str(tmp_path / "out"), **BASIC) == EXIT_FAILED
    err = capsys.readouterr().err
    assert "train.xlsx:5: column 'text' holds a number (42), not a text" in err
    out = tmp_path / "skipped"
    assert prepro(tmp_path, data_source=str(source), data_files="*.xlsx", parser="excel", sheet_name="reviews",
                  fields=["text", "label"], data_dir=str(out), skip_bad_lines=True, max_bad_fraction=0.2,
                  **BASIC) == 0
    log = (out / "log.txt").read_text()
    assert "train: 18 samples from 20 lines" in log and "skipped 2 bad" in log
    assert "train.xlsx:11: column 'label' holds the Excel error #DIV/0!" in log


def _cache_error_value(path, cell, value):
    """openpyxl writes formulas without their computed value; give the cell the error Excel would cache."""
    import zipfile

    with zipfile.ZipFile(path) as z:
        parts = {name: z.read(name) for name in z.namelist()}
    sheet = next(n for n in parts if n.startswith("xl/worksheets/sheet") and b"<f>1/0</f>" in parts[n])
    parts[sheet] = parts[sheet].replace(f'<c r="{cell}"><f>1/0</f><v /></c>'.encode(),
                                        f'<c r="{cell}" t="e"><f>1/0</f><v>{value}</v></c>'.encode())
    assert f't="e"><f>1/0</f><v>{value}'.encode() in parts[sheet]
    with zipfile.ZipFile(path, "w") as z:
        for name, data in parts.items():
            z.writestr(name, data)


def test_excel_without_fields_reads_every_column_and_names_letters(tmp_path, source, capsys):
    rows = [["a fine day", "pos"], ["a bad day", "neg"], [None, None], ["so so", 3]]
    write_xlsx(source / "train.xlsx", rows, header=None, sheet="Sheet1")
    out = tmp_path / "out"
    assert prepro(tmp_path, data_source=str(source), data_files="*.xlsx", parser="excel", sheet_name="Sheet1",
                  data_dir=str(out), **{**BASIC, "tokenizer": "space"}) == 0
    assert hjson.loads((out / "meta.hjson").read_text())["data_size"] == {"train": 3}  # the empty row is left out
    assert sorted((out / "target_map.txt").read_text().split()) == ["3", "neg", "pos"]  # a number label is taken
    write_lines(source / "train.txt", ["x\ty"])
    (source / "train.xlsx").write_bytes(b"not a zip")
    assert prepro(tmp_path, data_source=str(source), data_files="*.xlsx", parser="excel",
                  data_dir=str(tmp_path / "o2"), **BASIC) == EXIT_FAILED
    assert "train.xlsx: not an .xlsx workbook" in capsys.readouterr().err


def test_a_blocked_optional_library_is_one_line_naming_the_extra(tmp_path, source):
    write_parquet(source / "train.parquet", rows_of("dev"))
    write_xlsx(source / "train.xlsx", rows_of("dev"))
    for parser, module, extra in (("parquet", "pyarrow", "parquet"), ("arrow", "pyarrow", "parquet"),
                                  ("excel", "openpyxl", "excel")):
        config = tmp_path / f"{parser}.hjson"
        config.write_text(hjson.dumps(dict(data_source=str(source), data_files=f"*.{'xlsx' if parser == 'excel' else 'parquet'}",
                                           parser=parser, data_dir=str(tmp_path / parser), **BASIC)))
        code = (f"import sys; sys.modules[{module!r}] = None\n"
                "from xdpx.cli import run_chain\n"
                f"sys.exit(run_chain(['x-prepro', {str(config)!r}]))")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == EXIT_FAILED and len(lines) == 1, done.stderr
        assert lines[0] == f"x-prepro: error: parser {parser!r} needs the optional package {module}: pip install " \
            f"'xdpx[{extra}]'"
        assert not (tmp_path / parser).exists()


def test_a_table_parser_reads_a_line_as_a_json_object_of_its_columns():
    """x-serve sends lines: a run trained on a table takes {"column": value} objects of the same columns."""
    from xdpx.config.options import Args
    from xdpx.data import parsers

    for name in ("parquet", "excel", "arrow"):
        parser = parsers.get(name)(Args({"fields": ["text", "label"], "class_names": True, "sheet_name": None},
                                        {}, set(), {}))
        assert parser.parse('{"label": "pos", "text": "很好"}') == ["很好", "pos"]
        assert parser.parse({"text": "很好", "label": 1}) == ["很好", "1"]
