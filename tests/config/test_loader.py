"""The config language: inheritance, variables, loops, errors (docs/config.md)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from xdpx.config.errors import ConfigError
from xdpx.config.loader import load_config


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def values(path: Path) -> list[dict]:
    return [c.values for c in load_config(str(path))]


def test_seed_grid_example_expands_first_loop_fastest(tmp_path):
    write(tmp_path / "train_config.hjson", "{learning_rate: 1e-3, batch_size: 16, model: cls_cnn}")
    grid = write(tmp_path / "grid.hjson", """
        { __parent__: [ ./train_config
                        [ {learning_rate: 1e-5} {learning_rate: 2e-5} ]
                        [ {batch_size: 32} {batch_size: 64} ] ]
          save_dir: outputs/run.lr${learning_rate}.bs${batch_size} }
        """)
    runs = values(grid)
    assert [(r["learning_rate"], r["batch_size"]) for r in runs] == [(1e-5, 32), (2e-5, 32), (1e-5, 64), (2e-5, 64)]
    assert runs[0]["save_dir"] == "outputs/run.lr1e-05.bs32"
    assert all(r["model"] == "cls_cnn" for r in runs)


def test_cross_validation_loop_over_def_variables(tmp_path):
    write(tmp_path / "train.hjson", "{batch_size: 8}")
    cv = write(tmp_path / "cv.hjson", """
        { __parent__: [ train, [ {__def__: {valid_id: 0}} {__def__: {valid_id: 1}} {__def__: {valid_id: 2}} ] ]
          valid_subset: split${valid_id}
          save_dir: out/cv${valid_id} }
        """)
    runs = values(cv)
    assert [r["valid_subset"] for r in runs] == ["split0", "split1", "split2"]
    assert "__def__" not in runs[0] and "valid_id" not in runs[0]


def test_child_beats_parents_and_later_parent_beats_earlier(tmp_path):
    write(tmp_path / "a.hjson", "{x: 1, y: 1, z: 1}")
    write(tmp_path / "b.hjson", "{y: 2, z: 2}")
    child = write(tmp_path / "c.hjson", "{__parent__: [a, b], z: 3}")
    assert values(child) == [{"x": 1, "y": 2, "z": 3}]


def test_grandparents_resolve_relative_to_the_file_that_names_them(tmp_path):
    write(tmp_path / "base" / "root.hjson", "{depth: 0, root_only: true}")
    write(tmp_path / "base" / "mid.hjson", "{__parent__: ./root, depth: 1}")
    child = write(tmp_path / "exp" / "leaf.hjson", "{__parent__: ../base/mid.hjson, depth: 2}")
    [run] = load_config(str(child))
    assert run.values == {"depth": 2, "root_only": True}
    assert run.sources["root_only"].endswith("root.hjson")
    assert run.sources["depth"].endswith("leaf.hjson")


def test_variables_keep_type_when_whole_and_stringify_when_partial(tmp_path):
    cfg = write(tmp_path / "v.hjson", """
        { __def__: {n: 3, flag: true}
          count: ${n}, name: "run-${n}-${flag}", nested: {list: ["${n}", {deep: "${count}"}]}, on: ${flag} }
        """)
    [run] = values(cfg)
    assert run["count"] == 3 and run["name"] == "run-3-true" and run["on"] is True
    assert run["nested"] == {"list": [3, {"deep": 3}]}


def test_def_variables_take_precedence_over_keys(tmp_path):
    cfg = write(tmp_path / "v.hjson", "{__def__: {a: from_def}, a: from_key, b: ${a}}")
    assert values(cfg)[0]["b"] == "from_def"


def test_parent_path_uses_a_variable_set_in_the_child(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "data" / "reviews" / "meta.hjson", "{vocab_size: 100, processor: single}")
    cfg = write(tmp_path / "configs" / "train.hjson", """
        { __parent__: ${data_dir}/meta, data_dir: data/reviews, size: ${vocab_size} }
        """)
    [run] = values(cfg)
    assert run == {"vocab_size": 100, "processor": "single", "data_dir": "data/reviews", "size": 100}


def test_prefixed_parent(tmp_path):
    write(tmp_path / "teacher.hjson", "{hidden_size: 768, layers: 12}")
    cfg = write(tmp_path / "distill.hjson", "{__parent__: 'teacher >> teacher_', hidden_size: 128}")
    assert values(cfg) == [{"teacher_hidden_size": 768, "teacher_layers": 12, "hidden_size": 128}]


def test_ignore_drops_inherited_keys(tmp_path):
    write(tmp_path / "p.hjson", "{keep: 1, drop: 2}")
    cfg = write(tmp_path / "c.hjson", "{__parent__: p, __ignore__: [drop]}")
    assert values(cfg) == [{"keep": 1}]


def test_top_level_list_is_several_runs(tmp_path):
    cfg = write(tmp_path / "runs.hjson", "[{a: 1}, {a: 2}]")
    assert values(cfg) == [{"a": 1}, {"a": 2}]


def test_parent_list_of_dicts_is_a_loop(tmp_path):
    cfg = write(tmp_path / "c.hjson", "{__parent__: [{lr: 1}, {lr: 2}], out: o${lr}}")
    assert values(cfg) == [{"lr": 1, "out": "o1"}, {"lr": 2, "out": "o2"}]


def test_extension_is_optional_and_json_works(tmp_path):
    write(tmp_path / "p.json", '{"a": 1}')
    cfg = write(tmp_path / "c.hjson", "{__parent__: p}")
    assert values(tmp_path / "c") == [{"a": 1}]
    assert values(cfg) == [{"a": 1}]


def test_builtins(tmp_path):
    cfg = write(tmp_path / "b.hjson", "{d: ${__date__}, w: ${__workers__}, fp16: ${__apex__}}")
    [run] = values(cfg)
    assert len(run["d"]) == 8 and run["w"] == 1 and run["fp16"] is False  # no GPU on CI machines


@pytest.mark.parametrize(
    "text, message",
    [
        ("{a: 1, a: 2}", "duplicate key 'a'"),
        ("{a: ${missing_var}}", "undefined variable '${missing_var}'"),
        ("{a: ${b}, b: ${a}}", "variable cycle"),
        ("{__parnt__: x}", "unknown reserved key '__parnt__'"),
        ("{a: [1, 2}", "line 1"),
    ],
)
def test_errors_name_the_file_and_problem(tmp_path, text, message):
    cfg = write(tmp_path / "bad.hjson", text)
    with pytest.raises(ConfigError) as err:
        load_config(str(cfg))
    assert message in str(err.value)
    assert "bad.hjson" in str(err.value)


def test_undefined_variable_suggests_the_closest_name(tmp_path):
    cfg = write(tmp_path / "c.hjson", "{learning_rate: 1, save_dir: out${learning_rat}}")
    with pytest.raises(ConfigError, match=r"key 'save_dir'.*Did you mean '\$\{learning_rate\}'"):
        load_config(str(cfg))


def test_inheritance_cycle_shows_the_chain(tmp_path):
    write(tmp_path / "a.hjson", "{__parent__: b}")
    write(tmp_path / "b.hjson", "{__parent__: a}")
    with pytest.raises(ConfigError, match=r"cycle: .*a.hjson -> .*b.hjson -> .*a.hjson"):
        load_config(str(tmp_path / "a.hjson"))


def test_missing_parent_names_the_paths_tried(tmp_path):
    cfg = write(tmp_path / "c.hjson", "{__parent__: nowhere}")
    with pytest.raises(ConfigError, match="config file 'nowhere' not found"):
        load_config(str(cfg))
