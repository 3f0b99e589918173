"""The TSV cell escaping of every file XDPX writes as TSV (x-pred's outputs, an index folder's texts.tsv):
``\\`` is written ``\\\\``, a tab ``\\t``, a newline ``\\n`` and a carriage return ``\\r``, so a cell never
holds a tab or a line break; quotes are plain characters."""

from __future__ import annotations

_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}
_UNESCAPES = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}


def escape(text: str) -> str:
    """A TSV cell of ``text``: backslash, tab, newline and carriage return as two-character escapes."""
    if not any(c in text for c in _ESCAPES):
        return text
    return "".join(_ESCAPES.get(c, c) for c in text)


def unescape(cell: str) -> str:
    """The original text of a cell written by :func:`escape`."""
    if "\\" not in cell:
        return cell
    out, i = [], 0
    while i < len(cell):
        if cell[i] == "\\" and i + 1 < len(cell) and cell[i + 1] in _UNESCAPES:
            out.append(_UNESCAPES[cell[i + 1]])
            i += 2
        else:
            out.append(cell[i])
            i += 1
    return "".join(out)
