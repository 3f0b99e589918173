"""x-train run from another folder than the one its relative data_dir was written for: the error says which
path it resolved, from where (the working directory, not the config's folder), where the data does exist,
and the fix, which then works as said."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xdpx.cli import run_chain

TINY = {"model": "cls_cnn", "loss": "cross_entropy", "embedding_dim": 8, "num_filters": 4, "kernel_sizes": [2],
        "batch_size": 16, "max_update": 2, "major_metric": "accuracy", "learning_rate": 1e-3}


@pytest.fixture
def project(reviews: Path, tmp_path: Path) -> Path:
    """proj/data (the x-prepro output), proj/configs/*.hjson naming it as `data`; and an unrelated folder."""
    proj = tmp_path / "proj"
    (proj / "configs").mkdir(parents=True)
    (proj / "data").symlink_to(reviews, target_is_directory=True)
    (proj / "configs" / "parent.hjson").write_text(json.dumps(
        {"__parent__": "${data_dir}/meta", "data_dir": "data", "save_dir": "runs/a", **TINY}))
    (proj / "configs" / "plain.hjson").write_text(json.dumps(  # no __parent__: x-train's own check speaks
        {"data_dir": "data", "save_dir": "runs/a", **TINY}))
    (tmp_path / "elsewhere").mkdir()
    return proj


@pytest.mark.parametrize("config", ["parent", "plain"])
def test_a_relative_data_dir_seen_from_another_folder_names_the_folder_to_run_from(
        project: Path, config: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    elsewhere = project.parent / "elsewhere"
    monkeypatch.chdir(elsewhere)
    assert run_chain(["x-train", f"../proj/configs/{config}.hjson", "--dry"]) == 2
    err = capsys.readouterr().err
    assert "key '__parent__'" in err if config == "parent" else "key 'data_dir': 'data'" in err, err
    assert (f"It exists from {project}: relative paths of options such as data_dir are relative to the working "
            f"directory ({elsewhere}), not to the config's folder; run the command from {project} (cd {project}), "
            "or write data_dir as an absolute path") in err, err
    assert len(err.strip().splitlines()) == 1

    monkeypatch.chdir(project)  # the fix, as the message says it: data_dir found
    code = run_chain(["x-train", f"configs/{config}.hjson", "--dry"])
    if config == "parent":
        assert code == 0, capsys.readouterr().err
    else:  # without __parent__: ${data_dir}/meta the config still lacks the data facts, now said as such
        assert "holds no meta.hjson" not in capsys.readouterr().err
    assert not (project / "runs").exists()


def test_no_folder_hint_when_the_data_is_nowhere(tmp_path: Path, monkeypatch, capsys) -> None:
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "t.hjson").write_text(json.dumps({"__parent__": "${data_dir}/meta", "data_dir": "nodata",
                                                              "save_dir": "runs/a", **TINY}))
    monkeypatch.chdir(tmp_path)
    assert run_chain(["x-train", "configs/t.hjson", "--dry"]) == 2
    err = capsys.readouterr().err
    assert "run x-prepro with this data_dir first" in err and "It exists from" not in err, err
