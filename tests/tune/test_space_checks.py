"""x-tune checks the space, the base config and tune.hjson before any trial: errors name the file and the
key, exit 2, and nothing is written (not even into an existing study). ``--dry`` shows the plan."""

from __future__ import annotations

from pathlib import Path

import pytest
from tune_helpers import SPACE, load_study, tune, write_json, write_study


def error_of(capsys: pytest.CaptureFixture[str], path: Path) -> str:
    assert tune(path) == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("entry, expected", [
    ({"learnin_rate": {"type": "float", "values": [1e-3, 1e-2]}}, "unknown key 'learnin_rate'. Did you mean 'learning_rate'?"),
    ({"learning_rate": {"type": "float", "values": [1e-2, 1e-3]}}, "key 'learning_rate': values [0.01, 0.001] is an empty range"),
    ({"learning_rate": {"type": "float", "values": [0.0, 1e-2], "log": True}}, "log: true needs a positive range"),
    ({"num_filters": {"type": "int", "values": [4, 12], "step": 16}}, "step 16 is larger than the range [4, 12]"),
    ({"num_filters": {"type": "float", "values": [4.5, 12.5]}}, "key 'num_filters' (value 4.5): expected int, got float"),
    ({"dropout": {"type": "categorial", "values": [0.1]}}, "type 'categorial' is not one of float, int, categorical. Did you mean 'categorical'?"),
    ({"dropout": {"type": "categorical", "value": [0.1]}}, "unknown field 'value'. Did you mean 'values'?"),
    ({"max_update": {"type": "int", "values": [10, 20]}}, "key 'max_update' cannot be searched"),
])
def test_bad_space_is_refused_naming_file_and_key(reviews: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  entry: dict, expected: str) -> None:
    path = write_study(tmp_path, reviews, space=entry)
    err = error_of(capsys, path)
    assert str(tmp_path / "space.hjson") in err
    assert expected in err
    assert not (tmp_path / "study").exists()


def test_bad_tune_keys_and_base_config(reviews: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_study(tmp_path, reviews, max_trail=4)
    assert "unknown key 'max_trail'. Did you mean 'max_trials'?" in error_of(capsys, path)
    path = write_study(tmp_path, reviews, pruner="hyperband", cull_keep_ratio=0.8)
    assert "cull_keep_ratio above 0.5 needs pruner: percentile" in error_of(capsys, path)
    path = write_study(tmp_path, reviews, base={"batch_sise": 8})
    err = error_of(capsys, path)
    assert "unknown key 'batch_sise'. Did you mean 'batch_size'?" in err and str(tmp_path / "train.hjson") in err
    path = write_study(tmp_path, reviews, storage="postgresql://nobody@127.0.0.1:1/none")
    assert tune(path) == 1
    err = capsys.readouterr().err
    assert "storage postgresql://nobody@127.0.0.1:1/none: cannot open it" in err
    assert not (tmp_path / "study" / "trial_0").exists()


def test_bad_space_writes_nothing_into_an_existing_study(reviews: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    import optuna

    save_dir = tmp_path / "study"
    save_dir.mkdir()
    optuna.create_study(study_name="x-tune", storage=f"sqlite:///{save_dir / 'study.db'}", direction="maximize")
    before = (save_dir / "study.db").read_bytes()
    path = write_study(tmp_path, reviews, space={**SPACE, "dropout": {"type": "categorical", "values": []}})
    assert "key 'dropout': values must be a non-empty list" in error_of(capsys, path)
    assert (save_dir / "study.db").read_bytes() == before
    assert load_study(save_dir).trials == []
    assert sorted(p.name for p in save_dir.iterdir()) == ["study.db"]


def test_dry_prints_space_samples_and_plan(reviews: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_study(tmp_path, reviews, max_trials=8)
    assert tune(path, "--dry") == 0
    out = capsys.readouterr().out
    assert "#   learning_rate: float in [0.001, 0.03], log scale" in out
    assert "#   num_filters: int in [4, 12], step 4" in out
    assert out.count("#   trial ") == 3
    assert "a trial runs 16 updates of 16 samples, evaluated every 4 updates; pruner hyperband" in out
    # the default cull_keep_ratio 0.5: reduction factor 2, and Optuna's three brackets for 16 / 4 = 2^2 updates
    assert "assessments at updates [4, 8]" in out and "(reduction factor 2)" in out
    assert "hyperband: 3 bracket(s)" in out
    assert "bracket 0: about 40% of the trials (~3 of 8), assessed at updates [4, 8]" in out
    assert "bracket 1: about 30% of the trials (~2 of 8), assessed at updates [8]" in out
    assert "bracket 2: about 30% of the trials (~2 of 8), never assessed: they all run to the end" in out
    assert not (tmp_path / "study").exists()


def test_config_language_works_in_all_three_files(reviews: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    write_study(tmp_path, reviews)
    write_json(tmp_path / "space_common.hjson", {"dropout": {"type": "categorical", "values": [0.0, 0.3]}})
    write_json(tmp_path / "space.hjson", {"__parent__": "space_common", "__def__": {"high": 0.02},
                                          "learning_rate": {"type": "float", "values": [1e-3, "${high}"]}})
    write_json(tmp_path / "tune_common.hjson", {"max_trials": 5})
    path = write_json(tmp_path / "tune2.hjson", {  # a loop: one study per tuner
        "__parent__": ["tune_common", [{"tuner": "tpe"}, {"tuner": "random"}]], "space_config": "./space",
        "base_config": "./train", "save_dir": str(tmp_path / "study_${tuner}"), "assess_interval": 4})
    assert tune(path, "--dry") == 0
    out = capsys.readouterr().out
    assert out.count("learning_rate: float in [0.001, 0.02]") == 2 and "dropout: one of [0.0, 0.3]" in out
    assert f"'{tmp_path / 'study_tpe'}'" in out and f"'{tmp_path / 'study_random'}'" in out
    assert "2 runs, all valid" in out


def test_x_tune_chains_with_other_commands(reviews: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from xdpx.cli import run_chain

    path = write_study(tmp_path, reviews)
    assert run_chain(["x-train", str(tmp_path / "train.hjson"), "x-tune", str(path), "--dry"]) == 0
    out = capsys.readouterr().out
    assert "# x-train" in out and "# x-tune" in out and "# search space:" in out
