"""A small hjson reader tuned for config files written on one line as well as many.

Why not hjson-py alone: in hjson a quoteless string runs to the end of the line, so the original XDPX's manual's
one-line examples (``{save_dir: outputs/run.lr${learning_rate} }``, ``{a: [x, y]}``) do not parse.
This reader accepts all hjson that configs use (optional root braces, optional commas, ``#``, ``//``
and ``/* */`` comments, quoted and ``'''`` multi-line strings, quoteless keys and values) with one
difference, documented in docs/config.md: a quoteless value also ends at a comma, at an unbalanced
``}`` or ``]``, and at a comment that follows whitespace. Quote a value that must contain these.

Duplicate keys are an error. Errors carry line and column. Nothing is evaluated: this is data.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["SyntaxProblem", "loads"]

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$")
_LITERALS = {"true": True, "false": False, "null": None}
_PUNCT = ",:[]{}"
_END = "\x00"


class SyntaxProblem(ValueError):
    def __init__(self, msg: str, line: int, col: int):
        super().__init__(f"line {line}, column {col}: {msg}")
        self.msg, self.line, self.col = msg, line, col


class _Reader:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    # -- positions and errors ----------------------------------------------------------------------
    def where(self, pos: int | None = None) -> tuple[int, int]:
        pos = self.pos if pos is None else pos
        line = self.text.count("\n", 0, pos) + 1
        col = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
        return line, col

    def fail(self, msg: str, pos: int | None = None) -> SyntaxProblem:
        return SyntaxProblem(msg, *self.where(pos))

    def peek(self) -> str:
        # a sentinel, not "": `"" in "{["` is True in Python
        return self.text[self.pos] if self.pos < len(self.text) else _END

    # -- whitespace and comments ---------------------------------------------------------------------
    def skip(self, commas: bool = False) -> None:
        t = self.text
        while self.pos < len(t):
            c = t[self.pos]
            if c in " \t\r\n\ufeff" or (commas and c == ","):
                self.pos += 1
            elif c == "#" or t.startswith("//", self.pos):
                end = t.find("\n", self.pos)
                self.pos = len(t) if end < 0 else end
            elif t.startswith("/*", self.pos):
                end = t.find("*/", self.pos + 2)
                if end < 0:
                    raise self.fail("unclosed /* comment")
                self.pos = end + 2
            else:
                return

    # -- values ----------------------------------------------------------------------------------------
    def value(self, depth: int, in_list: bool = False) -> Any:
        self.skip()
        c = self.peek()
        if c == "{":
            self.pos += 1
            return self.members(depth + 1, closing="}")
        if c == "[":
            self.pos += 1
            return self.elements(depth + 1)
        if c in "\"'":
            return self.quoted()
        if c == _END:
            raise self.fail("a value is missing at the end of the text")
        if c in ",:]}":
            raise self.fail(f"a value is missing before {c!r}")
        return self.quoteless(in_list)

    def quoted(self) -> str:
        t, start = self.text, self.pos
        if t.startswith("'''", start):
            end = t.find("'''", start + 3)
            if end < 0:
                raise self.fail("unclosed ''' string")
            self.pos = end + 3
            return _dedent_multiline(t[start + 3:end], self.where(start)[1] - 1)
        quote = t[start]
        i = start + 1
        out = []
        while True:
            if i >= len(t) or t[i] == "\n":
                raise self.fail(f"unclosed {quote} string", start)
            ch = t[i]
            if ch == quote:
                break
            if ch == "\\":
                i += 1
                esc = t[i] if i < len(t) else ""
                if esc == "u":
                    try:
                        out.append(chr(int(t[i + 1:i + 5], 16)))
                    except ValueError:
                        raise self.fail("bad \\u escape", i) from None
                    i += 5
                    continue
                mapping = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/", "\\": "\\",
                           '"': '"', "'": "'"}
                if esc not in mapping:
                    raise self.fail(f"bad escape \\{esc}", i - 1)
                out.append(mapping[esc])
                i += 1
                continue
            out.append(ch)
            i += 1
        self.pos = i + 1
        return "".join(out)

    def quoteless(self, in_list: bool) -> Any:
        """Read to end of line, a comma, an unbalanced closer, or a comment after whitespace.

        In a list, whitespace followed by ``{`` or ``[`` also ends it: ``[ ./base [ {...} ] ]``.
        """
        t, start = self.text, self.pos
        i, nest = start, 0
        while i < len(t):
            ch = t[i]
            if ch in "\r\n":
                break
            if ch in "{[":
                nest += 1
            elif ch in "}]":
                if nest == 0:
                    break
                nest -= 1
            elif ch == "," and nest == 0:
                break
            elif ch in " \t" and (t.startswith("#", i + 1) or t.startswith("//", i + 1)):
                break
            elif ch in " \t" and in_list and nest == 0 and t[i + 1:i + 2] in ("{", "["):
                break
            i += 1
        self.pos = i
        token = t[start:i].strip()
        if token in _LITERALS:
            return _LITERALS[token]
        if _NUMBER.match(token):
            return json.loads(token)
        return token

    def key(self) -> str:
        self.skip()
        c = self.peek()
        if c in "\"'":
            return self.quoted()
        t, start = self.text, self.pos
        i = start
        while i < len(t) and t[i] not in _PUNCT and not t[i].isspace():
            i += 1
        if i == start:
            raise self.fail(f"a key name is expected here, found {c!r}" if c != _END else "a key name is expected")
        self.pos = i
        return t[start:i]

    def members(self, depth: int, closing: str | None) -> dict[str, Any]:
        result: dict[str, Any] = {}
        while True:
            self.skip(commas=True)
            c = self.peek()
            if closing and c == closing:
                self.pos += 1
                return result
            if c == _END:
                if closing:
                    raise self.fail(f"missing {closing!r}: the text ended inside a {{...}} block")
                return result
            if c in "]}":
                raise self.fail(f"unexpected {c!r}")
            key_pos = self.pos
            key = self.key()
            self.skip()
            if self.peek() != ":":
                raise self.fail(f"expected ':' after key {key!r}")
            self.pos += 1
            if key in result:
                line, _ = self.where(key_pos)
                raise self.fail(f"duplicate key '{key}' (line {line}): keep only one of them", key_pos)
            result[key] = self.value(depth)

    def elements(self, depth: int) -> list[Any]:
        result: list[Any] = []
        while True:
            self.skip(commas=True)
            c = self.peek()
            if c == "]":
                self.pos += 1
                return result
            if c == _END:
                raise self.fail("missing ']': the text ended inside a [...] list")
            if c == "}":
                raise self.fail("unexpected '}' inside a [...] list")
            result.append(self.value(depth, in_list=True))


def _dedent_multiline(body: str, indent: int) -> str:
    # hjson: the first line break is dropped and the opening column's indentation removed.
    lines = body.split("\n")
    if lines and not lines[0].strip():
        lines = lines[1:]
    if lines and not lines[-1].strip():
        lines = lines[:-1]
    out = []
    for line in lines:
        k = 0
        while k < indent and k < len(line) and line[k] in " \t":
            k += 1
        out.append(line[k:])
    return "\n".join(out)


def loads(text: str) -> Any:
    """Parse hjson/json text; raises SyntaxProblem with line and column."""
    r = _Reader(text)
    r.skip()
    c = r.peek()
    if c in "{[":
        value = r.value(0)
    else:
        value = r.members(0, closing=None)
    r.skip()
    if r.pos < len(text):
        raise r.fail(f"unexpected text after the end of the config: {text[r.pos:r.pos + 20]!r}")
    return value
