"""Tag sequences of token classification (NER): units of a text, the BIO / BIOES schemes, entity spans.

A *unit* is what one tag labels: a character (``tag_unit: char``, Chinese) or a whitespace-separated
token (``tag_unit: whitespace``). :func:`units_of` gives each unit's character offsets in the text, so
predicted entities are reported as spans of the input text.

Entities are read from tags as conlleval and seqeval (default mode) read them (:func:`entity_spans`):
``I-X`` after ``O`` or after another type starts an entity (an invalid BIO sequence is repaired, not
dropped), ``B-``/``S-`` always start one, ``E-``/``S-`` end one. :func:`tags_of` writes spans back in a
scheme, so ``tags_of(entity_spans(t))`` is the repaired, valid form of any tag sequence.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from xdpx.data.errors import BadLine

SCHEMES = ("bio", "bioes")
UNITS = ("char", "whitespace")
OUTSIDE = "O"
_PREFIXES = {"B", "I", "E", "S"}
_WHITESPACE_TOKEN = re.compile(r"\S+")
_CHARACTER = re.compile(r"\S")

Span = tuple[int, int, str]  # (first unit, last unit + 1, entity type)


def units_of(text: str, unit: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of the units of ``text``: each non-space character (``char``) or
    each run of non-space characters (``whitespace``)."""
    pattern = _CHARACTER if unit == "char" else _WHITESPACE_TOKEN
    return [m.span() for m in pattern.finditer(text)]


def split_tag(tag: str) -> tuple[str, str]:
    """(prefix, type) of a tag: ('O', '') for O, ('B', 'PER') for B-PER; anything else is a BadLine."""
    if tag == OUTSIDE:
        return OUTSIDE, ""
    prefix, dash, kind = tag.partition("-")
    if not dash or prefix not in _PREFIXES or not kind:
        raise BadLine(f"tag {tag!r} is neither O nor B-/I-/E-/S- followed by a type (BIO or BIOES, e.g. B-PER)")
    return prefix, kind


def _ends(previous: str, tag: str, previous_type: str, kind: str) -> bool:
    # seqeval.metrics.sequence_labeling.end_of_chunk (conlleval's chunk end, with S- for BIOES)
    return (previous in ("E", "S") or (previous in ("B", "I") and tag in ("B", "S", "O"))
            or (previous != "O" and previous_type != kind))


def _starts(previous: str, tag: str, previous_type: str, kind: str) -> bool:
    # seqeval.metrics.sequence_labeling.start_of_chunk
    return (tag in ("B", "S") or (previous in ("E", "S", "O") and tag in ("E", "I"))
            or (tag != "O" and previous_type != kind))


def entity_spans(tags: Sequence[str]) -> list[Span]:
    """The entities of one sentence's tags, as conlleval / seqeval count them."""
    spans: list[Span] = []
    previous, previous_type, begin = "O", "", 0
    for i, tag in enumerate([*tags, OUTSIDE]):
        prefix, kind = split_tag(tag)
        if _ends(previous, prefix, previous_type, kind):
            spans.append((begin, i, previous_type))
        if _starts(previous, prefix, previous_type, kind):
            begin = i
        previous, previous_type = prefix, kind
    return spans


def tags_of(length: int, spans: Sequence[Span], scheme: str) -> list[str]:
    """Tags of ``length`` units with these (non-overlapping) entities, in ``scheme`` (bio or bioes)."""
    tags = [OUTSIDE] * length
    for begin, end, kind in spans:
        if scheme == "bioes" and end - begin == 1:
            tags[begin] = f"S-{kind}"
            continue
        tags[begin] = f"B-{kind}"
        for i in range(begin + 1, end):
            tags[i] = f"I-{kind}"
        if scheme == "bioes":
            tags[end - 1] = f"E-{kind}"
    return tags


def spans_of_characters(offsets: Sequence[tuple[int, int]], entities: Sequence[Sequence[object]],
                        text: str) -> list[Span]:
    """Unit spans of entities given in characters ``[start, end, type]`` (end exclusive); an entity that
    does not begin and end on unit boundaries, or overlaps another, is a BadLine."""
    starts = {start: i for i, (start, _) in enumerate(offsets)}
    ends = {end: i + 1 for i, (_, end) in enumerate(offsets)}
    spans: list[Span] = []
    for entity in entities:
        if (not isinstance(entity, (list, tuple)) or len(entity) != 3 or not all(isinstance(x, int) for x in entity[:2])
                or not isinstance(entity[2], str) or not entity[2]):
            raise BadLine(f"an entity is [start, end, type] (character offsets, end exclusive), got {entity!r}")
        start, end, kind = entity
        if start not in starts or end not in ends or end <= start:
            raise BadLine(f"entity {entity!r} ({text[start:end]!r}) does not begin and end on unit boundaries of the "
                          "text (tag_unit), or is empty")
        spans.append((starts[start], ends[end], kind))
    spans.sort()
    for (_, first_end, _), (second_start, _, _) in zip(spans, spans[1:]):
        if second_start < first_end:
            raise BadLine("entities overlap: a unit has one tag (nested entities are not supported)")
    return spans


def allowed_transitions(labels: Sequence[str]) -> tuple[list[list[bool]], list[bool], list[bool]]:
    """Which tag may follow which (``[from][to]``), which may start and which may end a sentence, so that
    every allowed sequence is valid in its scheme: I-X (and E-X) only after B-X or I-X, no sentence starting
    inside an entity, and in BIOES none ending inside one (after B-X or I-X). The scheme is read off the
    labels (E- or S- tags: BIOES)."""
    parts = [split_tag(label) for label in labels]
    bioes = any(prefix in ("E", "S") for prefix, _ in parts)

    def inside(prefix: str) -> bool:
        return prefix == "I" or (bioes and prefix == "E")

    def follows(first: tuple[str, str], second: tuple[str, str]) -> bool:
        (p1, t1), (p2, t2) = first, second
        if inside(p2):  # continues an entity: only one of its own type that is still open
            return p1 in ("B", "I") and t1 == t2
        # B / S / O: in BIOES an open entity (after B or I) must end first
        return not (bioes and p1 in ("B", "I"))

    transitions = [[follows(a, b) for b in parts] for a in parts]
    start = [not inside(prefix) for prefix, _ in parts]
    end = [not (bioes and prefix in ("B", "I")) for prefix, _ in parts]
    return transitions, start, end
