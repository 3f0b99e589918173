"""Entity spans of texts with spaces and multi-byte characters, against values written out by hand.

Offsets are Python string positions (code points) of the input text, end exclusive: a space is no unit
(tag_unit char: each non-space character; whitespace: each run of non-space characters), yet it counts in
the offsets, so an entity after a space starts past it. ``é``/``ñ``/``ã`` and Chinese characters are one
position each (two or three bytes in UTF-8: byte offsets would differ).
"""

from __future__ import annotations

import numpy as np
import pytest

from xdpx.config.options import Args
from xdpx.data import loaders, parsers
from xdpx.data.errors import BadLine
from xdpx.data.tags import spans_of_characters, units_of
from xdpx.serve.predictor import load_predictor
from xdpx.tasks.ner import EntityPredictions

SPANISH = "José Núñez  visitó São Paulo"  # two spaces after Núñez
CHINESE = "北京 欢迎 José"


def test_units_and_their_offsets_skip_spaces_but_count_them():
    assert units_of(SPANISH, "whitespace") == [(0, 4), (5, 10), (12, 18), (19, 22), (23, 28)]
    assert units_of(CHINESE, "char") == [(0, 1), (1, 2), (3, 4), (4, 5), (6, 7), (7, 8), (8, 9), (9, 10)]
    assert units_of(" a\tb\n", "char") == [(1, 2), (3, 4)]
    assert units_of(CHINESE, "whitespace") == [(0, 2), (3, 5), (6, 10)]


def test_character_entities_become_unit_spans():
    whitespace = units_of(SPANISH, "whitespace")
    # "José Núñez" (0-10) is units 0-1; "São Paulo" (19-28) units 3-4
    assert spans_of_characters(whitespace, [[19, 28, "LOC"], [0, 10, "PER"]], SPANISH) == [(0, 2, "PER"), (3, 5, "LOC")]
    chars = units_of(CHINESE, "char")
    # "北京" (0-2) is units 0-1; "欢迎" (3-5) units 2-3; "José" (6-10) units 4-7
    assert spans_of_characters(chars, [[0, 2, "LOC"], [6, 10, "PER"]], CHINESE) == [(0, 2, "LOC"), (4, 8, "PER")]
    for bad in ([0, 3, "LOC"], [2, 5, "LOC"], [1, 2, "LOC"]):  # ends on a space, starts on one, mid-word
        with pytest.raises(BadLine, match="does not begin and end on unit boundaries"):
            spans_of_characters(whitespace, [bad], SPANISH)


def jsonl_fields(line: str, unit: str) -> tuple[list[str], list[str]]:
    args = Args({"tag_scheme": "bio", "tag_unit": unit}, {}, set(), {})
    parser, loader = parsers.get("ner_jsonl")(args), loaders.get("ner")(args)
    texts, tags = loader.fields(parser.parse(line), loader.layout_of([1, 2]))
    return texts, tags.names()


def test_jsonl_entities_of_a_text_with_spaces_give_the_tags_of_its_units():
    _, tags = jsonl_fields('{"text": "José Núñez  visitó São Paulo", "entities": [[0, 10, "PER"], [19, 28, "LOC"]]}',
                           "whitespace")
    assert tags == ["B-PER", "I-PER", "O", "B-LOC", "I-LOC"]
    _, tags = jsonl_fields('{"text": "北京 欢迎 José", "entities": [[0, 2, "LOC"], [6, 10, "PER"]]}', "char")
    assert tags == ["B-LOC", "I-LOC", "O", "O", "B-PER", "I-PER", "I-PER", "I-PER"]


def test_predicted_tags_become_spans_of_the_raw_text():
    labels = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    sample = {"text": CHINESE, "offsets": [(0, 1), (1, 2), (3, 4), (4, 5), (6, 7), (7, 8), (8, 9), (9, 10)]}
    # B-LOC I-LOC | O O | I-PER (read as a start) I-PER B-PER I-PER; -1 pads the row
    row = np.array([1, 2, 0, 0, 4, 4, 3, 4, -1, -1])
    assert EntityPredictions(labels).entities(row, sample) == [
        {"text": "北京", "type": "LOC", "start": 0, "end": 2},
        {"text": "Jo", "type": "PER", "start": 6, "end": 8},
        {"text": "sé", "type": "PER", "start": 8, "end": 10},
    ]
    whitespace = {"text": SPANISH, "offsets": [(0, 4), (5, 10), (12, 18), (19, 22), (23, 28)]}
    assert EntityPredictions(labels).entities(np.array([3, 4, 0, 1, 2]), whitespace) == [
        {"text": "José Núñez", "type": "PER", "start": 0, "end": 10},
        {"text": "São Paulo", "type": "LOC", "start": 19, "end": 28},
    ]


def read_bio(tags: list[str]) -> list[tuple[int, int, str]]:
    """A second reader of BIO tags, written for this test: B-X starts an entity, I-X continues one of X and
    starts one otherwise, O ends one."""
    spans: list[list] = []
    for i, tag in enumerate(tags):
        prefix, _, kind = tag.partition("-")
        if prefix == "I" and spans and spans[-1][1] == i and spans[-1][2] == kind:
            spans[-1][1] = i + 1
        elif prefix in ("B", "I"):
            spans.append([i, i + 1, kind])
    return [tuple(s) for s in spans]


def test_x_serve_reports_entities_at_the_raw_texts_offsets(crf_run):
    """The tiny run's own tags (whatever it predicts) placed on the units' hand-written offsets."""
    texts = {"北京 和 上海 的 江泽民": [0, 1, 3, 5, 6, 8, 10, 11, 12],
             "在 这一年，以江泽民同志为核心": [0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]}
    predictor = load_predictor(str(crf_run), cpu=True, threads=1)
    answers = predictor.predict_inputs(list(texts))
    found = 0
    for (text, starts), answer in zip(texts.items(), answers):
        assert len(answer["tags"]) == len(starts)  # a tag per non-space character
        expected = [{"text": text[starts[a]:starts[b - 1] + 1], "type": kind, "start": starts[a],
                     "end": starts[b - 1] + 1} for a, b, kind in read_bio(answer["tags"])]
        assert answer["entities"] == expected
        found += len(expected)
    assert found > 0, "the fixture run should predict some entities"
