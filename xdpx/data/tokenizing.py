"""Tokenizers: text -> tokens. Word-level ones (space, char_zh, jieba) give strings that the processor's
vocabulary numbers; subword ones (bert, auto) own their vocabulary and give ids directly.

``lower`` (an x-prepro option) applies to every tokenizer. Heavy libraries (tokenizers, jieba) are
imported when a tokenizer is built, not when this module is imported.
"""

from __future__ import annotations

import os
import re
from typing import Any

from xdpx import io
from xdpx.config.options import Option
from xdpx.data import tokenizers
from xdpx.data.dictionary import read_vocab
from xdpx.errors import UserError
from xdpx.models.checkpoints import CheckpointError
from xdpx.models.hf_hub import local_pretrained
from xdpx.utils.optional import require


class Tokenizer:
    """Base class. ``vocab_path`` is the vocabulary of tokenizers that own one (bert, auto)."""

    options: list[Any] = []
    has_own_vocab = False

    def __init__(self, args: Any, vocab_path: str | None = None) -> None:
        self.args = args
        self.lower = bool(args.get("lower", True))

    def tokenize(self, text: str) -> list[str]:
        raise NotImplementedError

    def tokenize_batch(self, texts: list[str]) -> list[list[str]]:
        return [self.tokenize(t) for t in texts]

    def ids_batch(self, texts: list[str]) -> list[list[int]]:
        raise NotImplementedError(f"{type(self).__name__} has no vocabulary of its own")

    def vocab_tokens(self) -> list[str]:
        """The tokenizer's own vocabulary in id order (written to data_dir/vocab.txt)."""
        raise NotImplementedError(f"{type(self).__name__} has no vocabulary of its own")


@tokenizers.register("space")
class SpaceTokenizer(Tokenizer):
    """Split on whitespace (pre-tokenized text, or languages with spaces between words)."""

    def tokenize(self, text: str) -> list[str]:
        return (text.lower() if self.lower else text).split()


# Chinese characters one by one; runs of Latin letters / digits (ASCII, accented or full-width) whole.
_LATIN = "0-9A-Za-z\u00c0-\u024f\uff10-\uff19\uff21-\uff3a\uff41-\uff5a"
_CHAR_ZH = re.compile(f"[{_LATIN}]+(?:[.'\\-][{_LATIN}]+)*|\\S")


@tokenizers.register("char_zh")
class ChineseCharTokenizer(Tokenizer):
    """Chinese characters as tokens, keeping Latin words and numbers (``3.5``, ``iPhone``) whole."""

    def tokenize(self, text: str) -> list[str]:
        return _CHAR_ZH.findall(text.lower() if self.lower else text)


@tokenizers.register("jieba")
class JiebaTokenizer(Tokenizer):
    """Chinese words by jieba (optional: pip install 'xdpx[jieba]'); spaces dropped."""

    def __init__(self, args: Any, vocab_path: str | None = None) -> None:
        super().__init__(args, vocab_path)
        jieba = require("jieba", "tokenizer 'jieba'")
        jieba.setLogLevel(60)
        self._cut = jieba.lcut

    def tokenize(self, text: str) -> list[str]:
        return [w for w in self._cut(text.lower() if self.lower else text) if not w.isspace()]


@tokenizers.register("bert")
class BertTokenizer(Tokenizer):
    """BERT WordPiece over a vocab.txt (the x-prepro ``vocab_file``), through the ``tokenizers`` library:
    text cleaned, Chinese characters split, optional lowercasing and accent stripping. Special tokens are
    added by the processor, not here.
    """

    options = [
        Option("strip_accents", bool, default=None, doc="remove accents; null: do it when lower is true (as BERT)"),
        Option("fast_chinese", bool, default=True,
               doc="look Chinese characters and punctuation up directly instead of running WordPiece on "
                   "them (same ids, several times faster on Chinese text)"),
    ]
    has_own_vocab = True

    def __init__(self, args: Any, vocab_path: str | None = None) -> None:
        super().__init__(args, vocab_path)
        # lazy: tokenizers (compiled, ~30 ms): only the wordpiece and HF tokenizers load it
        from tokenizers import BertWordPieceTokenizer

        if not vocab_path:
            raise UserError("tokenizer 'bert' needs vocab_file: the vocab.txt of the BERT model")
        self.vocab_path = vocab_path
        self.tokenizer = BertWordPieceTokenizer(io.cached_path(vocab_path) if io.is_remote(vocab_path) else vocab_path,
                                                lowercase=self.lower, strip_accents=args.get("strip_accents"))
        self.fast = None
        if args.get("fast_chinese", True):
            # lazy: fast_wordpiece (and unicodedata) only for the BERT tokenizer; --help starts without it
            from xdpx.data.fast_wordpiece import PieceCache

            self.fast = PieceCache(self._encode_plain)

    def _encode_plain(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(texts, add_special_tokens=False)]

    def ids_batch(self, texts: list[str]) -> list[list[int]]:
        return self.fast.encode_batch(texts) if self.fast is not None else self._encode_plain(texts)

    def tokenize(self, text: str) -> list[str]:
        return self.tokenizer.encode(text, add_special_tokens=False).tokens

    def vocab_tokens(self) -> list[str]:
        # the file's lines, one per id: get_vocab() keeps one id of a token written twice (two empty lines of a
        # vocabulary), and a vocab.txt one line short shifts every later id against the model's embedding rows
        return read_vocab(self.vocab_path)


def tokenizer_folder(path: str) -> str:
    """The folder ``tokenizer_dir`` names: itself, or the cached snapshot of a Hub name; the same lookup and
    the same message as pretrained_model (a UserError naming the key when the cache holds no such model)."""
    try:
        return local_pretrained(path, "tokenizer_dir")
    except CheckpointError as e:
        raise UserError(f"key 'tokenizer_dir': {e}") from None


def tokenizer_dir_problem(args: Any) -> str | None:
    """Why x-prepro's tokenizer_dir cannot serve ``tokenizer: auto`` (None when it can): checked before any work."""
    if args.get("tokenizer") != "auto" or not args.get("tokenizer_dir"):
        return None
    try:
        folder = tokenizer_folder(args.tokenizer_dir)
    except UserError as e:
        return str(e)
    if not io.exists(folder):
        return f"key 'tokenizer_dir': path {args.tokenizer_dir!r} does not exist"
    if not io.exists(io.join(folder, "tokenizer.json")):
        return (f"key 'tokenizer_dir': {args.tokenizer_dir!r} holds no tokenizer.json (tokenizer 'auto' reads a fast tokenizer: save one "
                "with AutoTokenizer.from_pretrained(...).save_pretrained(folder))")
    return None


@tokenizers.register("auto")
class AutoTokenizer(Tokenizer):
    """Any Hugging Face fast tokenizer: a directory holding tokenizer.json (e.g. a downloaded model).
    tokenizer.json is copied into data_dir, so training and prediction use the very same tokenizer.
    ``lower`` does not apply: the tokenizer's own normalizer decides.
    """

    options = [Option("tokenizer_dir", str, default=None,
                      doc="directory with tokenizer.json, or a Hugging Face Hub name held in the local cache "
                          "(x-prepro; found as pretrained_model is); later runs read data_dir/tokenizer.json")]
    has_own_vocab = True

    def __init__(self, args: Any, vocab_path: str | None = None) -> None:
        super().__init__(args, vocab_path)
        # lazy: tokenizers (compiled, ~30 ms): only the wordpiece and HF tokenizers load it
        from tokenizers import Tokenizer as HFTokenizer

        candidates = [io.join(os.path.dirname(vocab_path) or ".", "tokenizer.json")] if vocab_path else []
        # data_dir's copy first; tokenizer_dir (x-prepro's, perhaps a Hub name) is looked up only without one
        if args.get("tokenizer_dir") and not any(io.exists(c) for c in candidates):
            candidates.append(io.join(tokenizer_folder(args.tokenizer_dir), "tokenizer.json"))
        found = [c for c in candidates if io.exists(c)]
        if not found:
            raise UserError(f"tokenizer 'auto': no tokenizer.json in {candidates or 'tokenizer_dir (not set)'}")
        self.json_path = found[0]
        with io.open(self.json_path) as f:
            self.tokenizer = HFTokenizer.from_str(f.read())
        # a tokenizer.json saved with truncation or padding on would cut or pad the bare ids: the processor
        # truncates (max_len) and collate pads
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()

    def ids_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(texts, add_special_tokens=False)]

    def tokenize(self, text: str) -> list[str]:
        return self.tokenizer.encode(text, add_special_tokens=False).tokens

    def vocab_tokens(self) -> list[str]:
        """Tokens in id order; an id no token has (some vocabularies skip ids) gets a placeholder line, so
        the line number stays the id."""
        vocab = self.tokenizer.get_vocab(with_added_tokens=True)
        by_id = {i: token for token, i in vocab.items()}
        return [by_id.get(i, f"[unused-id-{i}]") for i in range(max(by_id, default=-1) + 1)]
