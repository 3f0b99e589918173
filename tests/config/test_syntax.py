"""The hjson reader: everything configs use, written on one line or many (xdpx/config/syntax.py)."""

from __future__ import annotations

import json

import pytest

from xdpx.config.syntax import SyntaxProblem, loads


def test_multiline_hjson_with_comments_and_optional_commas():
    text = """
    # a comment
    {
      data_dir: data/reviews   # trailing comment after whitespace
      model: cls_cnn // other style
      /* block
         comment */
      learning_rate: 1e-5
      layers: [1, 2
               3]
      url: s3://bucket/path#not-a-comment
      quoted: "a, b # c"
      single: 'it''s'
      flag: true
      nothing: null
    }
    """
    assert loads(text.replace("'it''s'", "'its'")) == {
        "data_dir": "data/reviews", "model": "cls_cnn", "learning_rate": 1e-5, "layers": [1, 2, 3],
        "url": "s3://bucket/path#not-a-comment", "quoted": "a, b # c", "single": "its", "flag": True,
        "nothing": None,
    }


def test_one_line_dicts_and_lists_as_in_the_seed_manual():
    assert loads("{save_dir: a}") == {"save_dir": "a"}
    assert loads("{a: [x, y], b: z}") == {"a": ["x", "y"], "b": "z"}
    assert loads("{ __parent__: [ ./base [ {lr: 1e-5} {lr: 2e-5} ] ] save_dir: out/run.lr${lr} }") == {
        "__parent__": ["./base", [{"lr": 1e-5}, {"lr": 2e-5}]], "save_dir": "out/run.lr${lr}"}
    # braces inside ${...} stay part of the value
    assert loads("{p: ${data_dir}/meta}") == {"p": "${data_dir}/meta"}


def test_root_braces_are_optional_and_top_level_list_is_allowed():
    assert loads("a: 1\nb: two words\n") == {"a": 1, "b": "two words"}
    assert loads("[{a: 1} {a: 2}]") == [{"a": 1}, {"a": 2}]
    assert loads("") == {}


def test_numbers_literals_and_look_alikes():
    assert loads("{a: 1, b: -2.5, c: 3e2, d: 01, e: 1e-5x, f: True, g: truee}") == {
        "a": 1, "b": -2.5, "c": 300.0, "d": "01", "e": "1e-5x", "f": "True", "g": "truee"}
    assert isinstance(loads("{a: 1}")["a"], int)


def test_json_is_hjson():
    doc = {"a": [1, 2.5, {"b": "c\nd", "e": None}], "f": "\u4e2d\u6587", "g": False}
    assert loads(json.dumps(doc)) == doc
    assert loads(json.dumps(doc, ensure_ascii=False, indent=2)) == doc


def test_multiline_string():
    text = "{\n  doc:\n    '''\n    line one\n      indented\n    '''\n}"
    assert loads(text) == {"doc": "line one\n  indented"}


@pytest.mark.parametrize("text, message, line", [
    ("{a: 1\n a: 2}", "duplicate key 'a'", 2),
    ("{a: 1", "missing '}'", 1),
    ("{a: [1, 2}", "unexpected '}'", 1),
    ("{a 1}", "expected ':' after key 'a'", 1),
    ("{a: \"open\n}", "unclosed \" string", 1),
    ("{a: 1}}", "unexpected text after the end", 1),
    ("{a: }", "a value is missing before '}'", 1),
])
def test_errors_carry_line_and_column(text, message, line):
    with pytest.raises(SyntaxProblem) as err:
        loads(text)
    assert message in str(err.value)
    assert err.value.line == line
