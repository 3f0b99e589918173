"""Option declarations: activation by value, validation errors naming key, file and fix."""

from __future__ import annotations

import ast

import pytest

from xdpx.config.errors import ConfigError
from xdpx.config.options import Option, exclusive, resolve
from xdpx.config.writers import format_args_py, format_dry, format_starter_config
from xdpx.registry import Registry, RegistryError

widgets = Registry("test_widget")


@widgets.register("round")
class Round:
    options = [Option("radius", float, default=1.0, doc="radius", validate=lambda v: v > 0,
                      validate_msg="must be positive")]


@widgets.register("square")
class Square:
    options = [Option("side", int, required=True, doc="side length")]


ROOT = [
    Option("widget", str, default="round", registry=widgets, doc="which widget"),
    Option("batch_size", int, required=True, doc="samples per batch"),
    Option("learning_rate", float, default=1e-3),
    Option("fp16", bool, default=False, children={True: [Option("fp16_init_scale", int, default=128)]}),
    Option("mode", str, default="a", choices=["a", "b"]),
    Option("overwrite", bool, default=False),
    Option("auto_suffix", bool, default=False),
    Option("max_epoch", int, default=None),
    Option("subsets", str | list[str], default="train"),
    Option("total", int, default=lambda a: a.batch_size * 2, default_doc="2 x batch_size"),
    exclusive("overwrite", "auto_suffix"),
]


def test_selecting_a_component_activates_its_options():
    args = resolve({"widget": "square", "side": 3, "batch_size": 4}, ROOT, "train")
    assert args.side == 3 and "radius" not in args
    assert args.group_of("side") == "test_widget: square"
    assert args.total == 8


def test_default_component_options_are_active():
    args = resolve({"batch_size": 4}, ROOT, "train")
    assert args.radius == 1.0 and args.learning_rate == 1e-3


def test_value_switches_on_child_options():
    assert "fp16_init_scale" not in resolve({"batch_size": 1}, ROOT, "train")
    assert resolve({"batch_size": 1, "fp16": True}, ROOT, "train").fp16_init_scale == 128
    with pytest.raises(ConfigError, match="unknown key 'fp16_init_scale'"):
        resolve({"batch_size": 1, "fp16_init_scale": 3}, ROOT, "train")


def test_misspelt_key_gets_did_you_mean_with_file():
    with pytest.raises(ConfigError) as err:
        resolve({"batch_size": 1, "learning_rat": 0.1}, ROOT, "train", sources={"learning_rat": "my.hjson"})
    assert "my.hjson: unknown key 'learning_rat'. Did you mean 'learning_rate'?" in str(err.value)


def test_key_of_an_unselected_component_says_whose_it_is():
    with pytest.raises(ConfigError, match="it is an option of test_widget 'square'"):
        resolve({"batch_size": 1, "side": 2}, ROOT, "train")


def test_all_problems_are_reported_together():
    with pytest.raises(ConfigError) as err:
        resolve({"learning_rate": "fast", "mode": "c", "widget": "round", "radius": -1}, ROOT, "train",
                origin="cfg.hjson")
    text = str(err.value)
    assert "missing required key 'batch_size'" in text
    assert "key 'learning_rate': expected float, got str 'fast'" in text
    assert "key 'mode': 'c' is not allowed" in text
    assert "key 'radius': -1: must be positive" in text


def test_unknown_component_lists_the_available_ones():
    with pytest.raises(ConfigError, match=r"unknown test_widget 'squre'. Did you mean 'square'\? Available: round, square"):
        resolve({"batch_size": 1, "widget": "squre"}, ROOT, "train")
    with pytest.raises(RegistryError, match="Available: round, square"):
        widgets.get("hexagon")


def test_types_ints_become_floats_and_bools_are_not_ints():
    args = resolve({"batch_size": 2, "learning_rate": 1, "subsets": ["a", "b"]}, ROOT, "train")
    assert isinstance(args.learning_rate, float)
    with pytest.raises(ConfigError, match="expected int, got bool"):
        resolve({"batch_size": True}, ROOT, "train")
    with pytest.raises(ConfigError, match=r"expected Union\[str, List\[str\]\]"):
        resolve({"batch_size": 1, "subsets": [1]}, ROOT, "train")


def test_none_default_accepts_null():
    assert resolve({"batch_size": 1, "max_epoch": None}, ROOT, "train").max_epoch is None


def test_rules_report_conflicts_with_files():
    with pytest.raises(ConfigError, match="a.hjson: overwrite and auto_suffix exclude each other"):
        resolve({"batch_size": 1, "overwrite": True, "auto_suffix": True}, ROOT, "train",
                sources={"overwrite": "a.hjson", "auto_suffix": "a.hjson"})


def test_required_null_must_be_explicit():
    root = [Option("pretrained_model", str, required=True, default=None, doc="path, or null for random init")]
    assert resolve({"pretrained_model": None}, root, "m").pretrained_model is None
    with pytest.raises(ConfigError, match="missing required key 'pretrained_model'"):
        resolve({}, root, "m")


def test_path_checks(tmp_path):
    root = [Option("data", str, path="input"), Option("out", str, path="output")]
    resolve({"data": str(tmp_path), "out": str(tmp_path / "new")}, root, "p")
    with pytest.raises(ConfigError, match="key 'data': path .* does not exist"):
        resolve({"data": str(tmp_path / "missing"), "out": str(tmp_path)}, root, "p")


def test_args_py_reads_back_with_literal_eval_and_marks_non_defaults():
    args = resolve({"batch_size": 4, "learning_rate": 1e-3, "fp16": True}, ROOT, "train")
    text = format_args_py(args)
    tree = ast.literal_eval(text)
    assert tree["train"]["batch_size"] == 4 and tree["test_widget: round"]["radius"] == 1.0
    assert "'batch_size': 4,  # *" in text
    assert "'learning_rate': 0.001,\n" in text  # equal to the default: no mark
    assert "'fp16_init_scale': 128,\n" in text


def test_starter_config_holds_only_non_defaults():
    from xdpx.config.loader import parse_hjson

    args = resolve({"batch_size": 4, "mode": "b"}, ROOT, "train")
    assert parse_hjson(format_starter_config(args)) == {"batch_size": 4, "mode": "b"}
    assert "* batch_size" in format_dry(args)


def test_alias_is_renamed_and_both_spellings_are_an_error():
    root = [Option("warmup_multiplier", int, default=6, aliases=("warmup_mutiplier",))]
    args = resolve({"warmup_mutiplier": 3}, root, "train", sources={"warmup_mutiplier": "old.hjson"})
    assert args.warmup_multiplier == 3 and not args.is_default("warmup_multiplier")
    assert args.source("warmup_multiplier") == "old.hjson"
    with pytest.raises(ConfigError) as err:
        resolve({"warmup_mutiplier": 3, "warmup_multiplier": 4}, root, "train", sources={"warmup_mutiplier": "a.hjson"})
    assert "a.hjson: keys 'warmup_multiplier' and 'warmup_mutiplier'" in str(err.value)
    assert "keep only 'warmup_multiplier'" in str(err.value)
