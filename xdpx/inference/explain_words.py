"""Token attributions back in the input's own words: the pieces a tokenizer made of a text are merged
into the words they came from (WordPiece ``##ing``, SentencePiece / BPE pieces), each word shown as the
text spells it (case and accents kept); Chinese characters stay characters, as BERT's tokenizers and
char_zh split them.

With the raw text (x-serve, x-pred on raw files): a tokenizer with its own vocabulary (bert, auto) gives
each token's character offsets and the pre-tokenizer's word; the other tokenizers (space, char_zh,
jieba) give the tokens themselves, found in the text in order. Without it (x-pred on a split of
data_dir): the pieces' strings, merged by their markers.
"""

from __future__ import annotations

from typing import Any

# markers of a piece that continues / begins a word
CONTINUES = "##"  # WordPiece
BEGINS = ("\u2581", "\u0120")  # SentencePiece's "▁", byte-level BPE's "Ġ"


def text_words(processor: Any, text: str, content: list[int]) -> list[tuple[str, list[int]]] | None:
    """``(word, the indices of its tokens in content)`` for ``text`` whose tokens (no special tokens)
    are ``content``; None when the tokenizer cannot say (then :func:`piece_words` does)."""
    tokenizer = processor.tokenizer
    own = getattr(tokenizer, "tokenizer", None)
    if getattr(tokenizer, "has_own_vocab", False) and hasattr(own, "encode"):
        encoding = own.encode(text, add_special_tokens=False)
        if list(encoding.ids) != list(content):  # another path made the ids (never seen): do not guess
            return None
        groups: dict[Any, list[int]] = {}
        for k, word in enumerate(encoding.word_ids):
            groups.setdefault(word if word is not None else ("token", k), []).append(k)
        words = []
        for members in groups.values():
            start = min(encoding.offsets[k][0] for k in members)
            end = max(encoding.offsets[k][1] for k in members)
            # byte-level BPE and SentencePiece count the space before a word into its first piece
            words.append((text[start:end].strip() or encoding.tokens[members[0]], members))
        return words
    if getattr(tokenizer, "has_own_vocab", False):
        return None
    tokens = tokenizer.tokenize(text)
    if len(tokens) != len(content):
        return None
    return aligned(text, tokens)


def aligned(text: str, tokens: list[str]) -> list[tuple[str, list[int]]]:
    """Each token as the text spells it: found in order (case-insensitively), else the token itself."""
    lowered, cursor, words = text.lower(), 0, []
    for k, token in enumerate(tokens):
        at = lowered.find(token.lower(), cursor) if token else -1
        if at < 0:
            words.append((token, [k]))
            continue
        words.append((text[at: at + len(token)], [k]))
        cursor = at + len(token)
    return words


def piece_words(pieces: list[str]) -> list[tuple[str, list[int]]]:
    """Words from the pieces' strings alone: ``##x`` continues the word before it; in a vocabulary whose
    pieces mark word starts (``▁x``, ``Ġx``), an unmarked piece continues the word before it."""
    marks_starts = any(p.startswith(BEGINS) for p in pieces)
    words: list[tuple[str, list[int]]] = []
    for k, piece in enumerate(pieces):
        continues = piece.startswith(CONTINUES) and len(piece) > len(CONTINUES)
        if marks_starts and not piece.startswith(BEGINS) and words:
            continues = True
        if continues and words:
            word, members = words[-1]
            words[-1] = (word + piece[len(CONTINUES):] if piece.startswith(CONTINUES) else word + piece, members + [k])
        else:
            words.append((piece[1:] if piece.startswith(BEGINS) and len(piece) > 1 else piece, [k]))
    return words


def merged(words: list[tuple[str, list[int]]], scores: list[float]) -> list[tuple[str, float]]:
    """``(word, score)``: a word's score is the sum of its pieces' (so the sum over words is the sum over
    tokens, and the completeness check still holds for the words)."""
    return [(word, float(sum(scores[k] for k in members))) for word, members in words]


def content_positions(ids: list[int], parts: list[list[int]]) -> list[list[int]] | None:
    """Where each text's tokens (``parts``, in order) sit in a field's ids, which adds special tokens
    around them ([CLS] a [SEP] b [SEP], a model's own template): the first run of each part after the
    previous one; None if a part is not found whole."""
    found, cursor = [], 0
    for part in parts:
        width = len(part)
        at = next((i for i in range(cursor, len(ids) - width + 1) if ids[i: i + width] == part), None)
        if at is None:
            return None
        found.append(list(range(at, at + width)))
        cursor = at + width
    return found
