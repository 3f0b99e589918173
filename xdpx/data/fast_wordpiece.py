"""An exact shortcut for BERT WordPiece on Chinese text.

BERT's pre-tokenizer isolates every Chinese character and every punctuation mark, and splits on spaces,
so a line is a sequence of independent pieces: single characters of those classes, and the runs of other
characters between them (Latin words, numbers). Each piece tokenizes the same wherever it occurs, so
its ids are computed once by the real tokenizer and looked up afterwards. The result is identical to
running the tokenizer on the whole line (tests compare both on real data); only new pieces reach it.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
from collections.abc import Callable

# BERT's definition of a Chinese character (CJK Unified Ideographs blocks and compatibility blocks).
_CJK = ("\u4e00-\u9fff\u3400-\u4dbf\uf900-\ufaff\U00020000-\U0002a6df\U0002a700-\U0002b73f"
        "\U0002b740-\U0002b81f\U0002b820-\U0002ceaf\U0002f800-\U0002fa1f")


_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0xF900, 0xFAFF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
               (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0x2F800, 0x2FA1F))


@functools.lru_cache(maxsize=1)
def _punctuation() -> list[str]:
    # ASCII symbols count as punctuation for BERT; elsewhere the Unicode categories P* (none above 0x30000).
    return [chr(c) for c in range(0x30000)
            if (33 <= c <= 47 or 58 <= c <= 64 or 91 <= c <= 96 or 123 <= c <= 126)
            or unicodedata.category(chr(c)).startswith("P")]


def _punctuation_class() -> str:
    return "".join(re.escape(c) for c in _punctuation())


_PIECES: re.Pattern[str] | None = None


def _pieces_pattern() -> re.Pattern[str]:
    global _PIECES
    if _PIECES is None:
        simple = f"{_CJK}{_punctuation_class()} "
        _PIECES = re.compile(f"[{simple}]|[^{simple}]+")
    return _PIECES


UNKNOWN, MULTI, DROPPED = -3, -2, -1  # table codes besides real ids (>= 0)


class PieceCache:
    """Encodes lines piece by piece, asking ``encode_plain`` (the real tokenizer) for unseen pieces.

    Lines made only of Chinese characters, punctuation and spaces (most Chinese text) go through a
    code point -> id table in numpy; the other lines are split into pieces looked up in a dict.
    """

    def __init__(self, encode_plain: Callable[[list[str]], list[list[int]]], max_pieces: int = 200_000) -> None:
        import numpy as np  # lazy: x-prepro --dry starts without numpy

        self.encode_plain = encode_plain
        self.max_pieces = max_pieces
        self.ids: dict[str, list[int]] = {" ": []}
        self.pattern = _pieces_pattern()  # compiled once per process
        table = np.full(sys.maxunicode + 1, MULTI, dtype=np.int32)
        for low, high in _CJK_RANGES:
            table[low: high + 1] = UNKNOWN
        table[[ord(c) for c in _punctuation()]] = UNKNOWN
        table[ord(" ")] = DROPPED
        self.table = table

    def _learn_chars(self, codes: object) -> None:
        chars = [chr(int(c)) for c in codes]
        for c, ids in zip(chars, self.encode_plain(chars)):
            self.table[ord(c)] = ids[0] if len(ids) == 1 else DROPPED if not ids else MULTI

    def encode_batch(self, texts: list[str]) -> list[object]:
        import numpy as np  # lazy: x-prepro --dry starts without numpy

        if not texts:
            return []
        codes = np.frombuffer("".join(texts).encode("utf-32-le"), dtype=np.uint32)
        values = self.table[codes]
        if (values == UNKNOWN).any():
            self._learn_chars(np.unique(codes[values == UNKNOWN]))
            values = self.table[codes]
        lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        other = np.concatenate([[0], np.cumsum(values == MULTI)])
        kept = np.concatenate([[0], np.cumsum(values >= 0)])
        flat = values[values >= 0]
        result: list[object] = np.split(flat, kept[bounds[1:-1]])
        fallback = np.nonzero(other[bounds[1:]] - other[bounds[:-1]])[0]
        if len(fallback):
            for i, ids in zip(fallback, self.encode_pieces([texts[i] for i in fallback])):
                result[i] = np.asarray(ids, dtype=np.int32)
        return result

    def encode_pieces(self, texts: list[str]) -> list[list[int]]:
        ids = self.ids
        split = [self.pattern.findall(t) for t in texts]
        unseen = list(dict.fromkeys(p for pieces in split for p in pieces if p not in ids))
        if unseen:
            if len(ids) + len(unseen) > self.max_pieces:  # bounded memory: keep only this batch's pieces
                keep = {p: ids[p] for pieces in split for p in pieces if p in ids}
                ids.clear()
                ids.update(keep)
                ids[" "] = []
            ids.update(zip(unseen, self.encode_plain(unseen)))
        return [[i for p in pieces for i in ids[p]] for pieces in split]
