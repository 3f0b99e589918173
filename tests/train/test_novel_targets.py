"""A label the target map does not know: x-prepro's target_unk makes it a class of its own (counted),
x-eval's ignore_novel_target skips it (counted); without them it is an error naming the line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from train_helpers import train, write_config

from xdpx.cli import run_chain

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples/data/sample/reviews"


def raw_data(folder: Path) -> Path:
    """train.txt as the sample; dev.txt with its first 3 labels replaced by 'meh' (a label train lacks)."""
    folder.mkdir()
    (folder / "train.txt").write_text((SAMPLE / "train.txt").read_text(encoding="utf-8"), encoding="utf-8")
    lines = (SAMPLE / "dev.txt").read_text(encoding="utf-8").splitlines()
    lines = [line.rsplit("\t", 1)[0] + "\tmeh" if i < 3 else line for i, line in enumerate(lines)]
    (folder / "dev.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def prepro(tmp_path: Path, name: str, source: Path, **options: object) -> int:
    config = tmp_path / f"{name}.hjson"
    config.write_text(json.dumps({"__parent__": str(REPO / "examples/prepro/reviews_char"),
                                  "data_source": str(source), "data_dir": str(tmp_path / name), "workers": 1,
                                  **options}))
    return run_chain(["x-prepro", str(config)])


def test_a_novel_label_is_an_error_without_target_unk(tmp_path, capsys):
    assert prepro(tmp_path, "plain", raw_data(tmp_path / "raw")) != 0
    err = capsys.readouterr().err
    assert "dev.txt:1" in err and "label 'meh' is not in the target map" in err and "target_unk" in err


def test_target_unk_makes_novel_labels_its_class_and_counts_them(tmp_path, capsys):
    assert prepro(tmp_path, "data", raw_data(tmp_path / "raw"), target_unk="other") == 0
    data = tmp_path / "data"
    assert (data / "target_map.txt").read_text().splitlines() == ["neg", "pos", "other"]
    out = capsys.readouterr().out
    assert "dev: 3 sample(s) with a label not in the target map became class 'other' (target_unk)" in out
    targets = np.load(data / "dev.target.npy")
    assert list(targets[:3]) == [2, 2, 2] and 2 not in targets[3:]
    # the option is in meta.hjson, so training inherits it and sees three classes
    config = write_config(tmp_path / "train.hjson", data, tmp_path / "run", max_update=2, viz=False)
    assert train(config) == 0
    assert "target_unk: other" in (tmp_path / "run" / "args.py").read_text().replace("'", "").replace('"', "")


def test_target_unk_missing_from_a_given_target_map_is_refused(tmp_path, capsys):
    given = tmp_path / "labels.txt"
    given.write_text("neg\npos\n")
    assert prepro(tmp_path, "data", raw_data(tmp_path / "raw"), target_unk="other", target_map_file=str(given)) != 0
    assert "target_unk 'other' is not one of its labels" in capsys.readouterr().err


@pytest.fixture(scope="module")
def run(reviews: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("novel")
    assert train(write_config(root / "train.hjson", reviews, root / "run", max_update=3, viz=False)) == 0
    return root / "run"


def x_eval(tmp_path: Path, run: Path, source: Path, **options: object) -> int:
    config = tmp_path / "eval.hjson"
    config.write_text(json.dumps({"save_dir": str(run), "valid_subset": str(source),
                                  "save_to_file": str(tmp_path / "scores.tsv"), "save_mode": "w", **options}))
    return run_chain(["x-eval", str(config)])


def test_x_eval_ignore_novel_target_skips_and_counts_them(run, tmp_path, capsys):
    dev = raw_data(tmp_path / "raw") / "dev.txt"
    assert x_eval(tmp_path, run, dev) != 0
    assert "label 'meh' is not in the target map" in capsys.readouterr().err
    assert x_eval(tmp_path, run, dev, ignore_novel_target=True) == 0
    out = capsys.readouterr().out
    assert "dev.txt: skipped 3 record(s) whose label is not in the run's target map (ignore_novel_target)" in out
    header, row = (tmp_path / "scores.tsv").read_text().splitlines()
    assert dict(zip(header.split("\t"), row.split("\t")))["samples"] == "57"
