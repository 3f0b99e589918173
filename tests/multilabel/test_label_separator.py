"""A label set written with another separator than label_separator (it would silently become a class of
its own), and a label that contains label_separator (x-pred's column could not be split back): refused
with the key or file:line named, nothing written; skip_bad_lines drops and names the lines instead."""

from __future__ import annotations

import json
from pathlib import Path

from ml_helpers import REPO, SAMPLE

from xdpx.cli import run_chain

LABELS = ["place", "time", "person", "organisation", "other_name"]


def prepro(root: Path, **overrides: object) -> int:
    config = {"__parent__": str(REPO / "examples/multilabel/prepro_char"), "data_source": str(root / "source"),
              "data_dir": str(root / "data"), "workers": 1, **overrides}
    (root / "prepro.json").write_text(json.dumps(config, ensure_ascii=False))
    return run_chain(["x-prepro", str(root / "prepro.json")])


def comma_source(root: Path) -> None:
    """The sample's train split with lines 4 and 14 ('person|place') written 'person,place'."""
    (root / "source").mkdir()
    lines = (SAMPLE / "train.txt").read_text(encoding="utf-8").splitlines(keepends=True)
    for number in (4, 14):
        assert lines[number - 1].endswith("\tperson|place\n")
        lines[number - 1] = lines[number - 1].replace("\tperson|place\n", "\tperson,place\n")
    (root / "source" / "train.txt").write_text("".join(lines), encoding="utf-8")
    (root / "source" / "dev.txt").write_text((SAMPLE / "dev.txt").read_text(encoding="utf-8"), encoding="utf-8")


def test_a_set_joined_by_another_separator_is_refused(tmp_path, capsys):
    comma_source(tmp_path)
    assert prepro(tmp_path) == 1
    err = capsys.readouterr().err
    assert (f"{REPO / 'examples/multilabel/prepro_char.hjson'}: key 'label_separator': label 'person,place' (2 train "
            "samples) is the labels ['person', 'place'] joined by ',', but label_separator is '|': it would be a "
            "class of its own. Join each set with '|' (or set label_separator: ',' if the whole data uses it)") in err, err
    assert not (tmp_path / "data").exists()


def test_skip_bad_lines_leaves_such_sets_out_and_names_their_lines(tmp_path, capsys):
    comma_source(tmp_path)
    assert prepro(tmp_path, skip_bad_lines=True) == 0
    out = capsys.readouterr()
    said = out.out + out.err
    assert "warning: label 'person,place' (2 train samples) is the labels ['person', 'place'] joined by ','" in said
    for number in (4, 14):
        assert f"{tmp_path / 'source' / 'train.txt'}:{number}: label 'person,place' is not in the target map" in said
    assert (tmp_path / "data" / "target_map.txt").read_text().split() == LABELS
    assert "train: 238" in (tmp_path / "data" / "meta.hjson").read_text()


def test_a_label_that_contains_the_separator_is_a_bad_line(tmp_path, capsys):
    (tmp_path / "source").mkdir()
    lines = (SAMPLE / "train.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    lines[5] = json.dumps({"text": "北京和上海", "labels": ["place", "city|town"]}, ensure_ascii=False) + "\n"
    (tmp_path / "source" / "train.jsonl").write_text("".join(lines), encoding="utf-8")
    assert prepro(tmp_path, parser="jsonl", fields=["text", "labels"], data_files="*.jsonl") == 1
    err = capsys.readouterr().err
    assert (f"{tmp_path / 'source' / 'train.jsonl'}:6: label 'city|town' contains label_separator '|': x-pred joins "
            "a sample's labels with it, so this label could not be split back; rename the label, or set another "
            "label_separator") in err, err
    assert not (tmp_path / "data").exists()
