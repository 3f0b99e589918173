r"""The vocabulary: vocab.txt (one token per line, the line number is the id) <-> ids.

A token holding a line break (a newline token of a tokenizer.json, say) would take two lines and shift every
later id. Such a vocabulary is written escaped (``\n``, ``\r``, ``\t``, ``\\``, ``\uXXXX`` for the other
characters that end a line for str.splitlines), with :data:`ESCAPED_MARK` as an extra last line; every other
vocabulary is written plain, as earlier releases wrote it (and BERT tools read it), and a file without the
mark is read plain: old vocab.txt files load unchanged. A line break here is what ends a line for the readers
of vocab.txt (Python's file iteration, transformers' load_vocab, the tokenizers library): ``\n`` and ``\r``.
U+2028, U+0085 and the like end a line only for str.splitlines; bert-base-chinese has such tokens, and its
vocab.txt must stay plain for BERT tools.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from xdpx import io
from xdpx.errors import UserError

ESCAPED_MARK = "#xdpx-vocab: escaped (\\n \\r \\t \\\\ \\uXXXX); this line is not a token"
# What ends a line for a reader of vocab.txt (universal newlines): a token holding one makes the file escaped.
LINE_BREAKS = re.compile("[\n\r]")
_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_TO_ESCAPE = re.compile("[\\\\\t\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_ESCAPED = re.compile(r"\\(u[0-9a-fA-F]{4}|.)")
_UNESCAPES = {"\\": "\\", "n": "\n", "r": "\r", "t": "\t"}


def escape(token: str) -> str:
    return _TO_ESCAPE.sub(lambda m: _ESCAPES.get(m.group(), f"\\u{ord(m.group()):04x}"), token)


def unescape(line: str, where: str = "") -> str:
    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        if code in _UNESCAPES:
            return _UNESCAPES[code]
        if code.startswith("u") and len(code) == 5:
            return chr(int(code[1:], 16))
        raise UserError(f"{where}: unknown escape \\{code} in an escaped vocabulary (\\n \\r \\t \\\\ \\uXXXX)")

    return _ESCAPED.sub(one, line)


def needs_escaping(tokens: list[str]) -> bool:
    """Whether a vocabulary can only be written escaped: a token holds a line break, or the last token is the
    mark itself (a plain file ending so would be read as escaped)."""
    return any(LINE_BREAKS.search(token) for token in tokens) or bool(tokens and tokens[-1] == ESCAPED_MARK)


def write_vocab(path: str, tokens: Iterable[str]) -> None:
    """vocab.txt: one token per line; escaped, with the mark as last line, only where a token needs it."""
    tokens = list(tokens)
    escaped = needs_escaping(tokens)
    with io.open(path, "w") as f:
        f.writelines(f"{escape(token) if escaped else token}\n" for token in tokens)
        if escaped:
            f.write(ESCAPED_MARK + "\n")


def read_vocab(path: str) -> list[str]:
    """The tokens of a vocab.txt in id order: plain, or escaped when its last line is the mark."""
    with io.open(path) as f:
        lines = [line.rstrip("\r\n") for line in f]
    if lines and lines[-1] == ESCAPED_MARK:
        return [unescape(line, f"{path}:{number}") for number, line in enumerate(lines[:-1], 1)]
    return lines


class Dictionary:
    """Tokens and their ids. ``pad_index`` / ``unk_index`` are the ids of the pad and unknown words."""

    def __init__(self, tokens: Iterable[str], pad_word: str = "[PAD]", unk_word: str = "[UNK]") -> None:
        self.tokens = list(tokens)
        self.index = {}
        for i, token in enumerate(self.tokens):
            self.index.setdefault(token, i)  # a repeated token keeps its first id (as BERT vocabularies)
        self.pad_word, self.unk_word = pad_word, unk_word
        missing = [w for w in (pad_word, unk_word) if w not in self.index]
        if missing:
            raise ValueError(f"the vocabulary lacks the special word(s) {missing} (pad_word / unk_word)")
        self.pad_index = self.index[pad_word]
        self.unk_index = self.index[unk_word]

    @classmethod
    def load(cls, path: str, pad_word: str = "[PAD]", unk_word: str = "[UNK]") -> Dictionary:
        return cls(read_vocab(path), pad_word, unk_word)

    @classmethod
    def build(cls, counts: Counter[str], pad_word: str = "[PAD]", unk_word: str = "[UNK]",
              threshold: int = -1, nwords: int = -1, always: Iterable[str] = (),
              specials: Iterable[str] = ()) -> Dictionary:
        """Special words first (pad, unk, then ``specials`` such as [CLS]), then words by count (ties in alphabetical order, so the result is
        deterministic): those seen more than ``threshold`` times, or listed in ``always`` (words of the
        pretrained embeddings), at most ``nwords`` of them (-1: no limit)."""
        always = set(always)
        head = list(dict.fromkeys([pad_word, unk_word, *specials]))
        words = sorted((w for w, c in counts.items() if (c > threshold or w in always) and w not in head),
                       key=lambda w: (-counts[w], w))
        if nwords >= 0:
            words = words[:nwords]
        return cls([*head, *words], pad_word, unk_word)

    def save(self, path: str) -> None:
        write_vocab(path, self.tokens)

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token: str) -> bool:
        return token in self.index

    def lookup(self, tokens: Iterable[str]) -> list[int]:
        get, unk = self.index.get, self.unk_index
        return [get(t, unk) for t in tokens]

    def string(self, ids: Iterable[int]) -> list[str]:
        return [self.tokens[i] for i in ids]

    def special_index(self, word: str) -> int | None:
        return self.index.get(word)
