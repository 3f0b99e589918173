"""The vocabulary: vocab.txt (one token per line, the line number is the id) <-> ids."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from xdpx import io


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
        with io.open(path) as f:
            return cls((line.rstrip("\r\n") for line in f), pad_word, unk_word)

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
        with io.open(path, "w") as f:
            f.writelines(f"{token}\n" for token in self.tokens)

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
