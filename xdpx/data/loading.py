"""Loaders: the columns of a record -> a sample's fields (text or texts, and the label when present).

Layouts are configured by column numbers (0-based; negative counts from the end):

    review text<TAB>pos          loader: single                            (defaults: text 0, label -1)
    1<TAB>a great film           loader: single, text_column: 1, label_column: 0
    g<TAB>f<TAB>y<TAB>id<TAB>4.2<TAB>s1<TAB>s2   loader: pair, text1_column: 5, text2_column: 6, label_column: 4

Whether a file is labelled is read from its first record: a record with exactly as many columns as the
loader has texts is unlabelled, and its texts are those columns in order (the same layout without the
label, as a prediction file has it). Later records must agree with the first; extra columns are ignored.
"""

from __future__ import annotations

from typing import Any

from xdpx.config.options import Option
from xdpx.data import loaders
from xdpx.data.errors import BadLine


class Loader:
    """Base class. ``fields(columns, labelled)`` -> (texts, label or None)."""

    options: list[Any] = []
    text_keys: tuple[str, ...] = ("text_column",)
    # A corpus groups lines into documents; its records are assembled into samples by the processor.
    is_corpus = False

    def __init__(self, args: Any) -> None:
        self.args = args
        self.text_columns = [getattr(args, key) for key in self.text_keys]
        self.label_column = args.get("label_column")
        self.num_texts = len(self.text_columns)

    def is_labelled(self, columns: list[str]) -> bool:
        return self.label_column is not None and len(columns) > self.num_texts

    def fields(self, columns: list[str], labelled: bool) -> tuple[list[str], str | None]:
        if labelled:
            needed = max(self.num_texts + 1, *(c + 1 if c >= 0 else -c for c in [*self.text_columns, self.label_column]))
            if len(columns) < needed:
                raise BadLine(f"expected at least {needed} columns (texts and label), got {len(columns)}")
            texts = [columns[c].strip() for c in self.text_columns]
            label = columns[self.label_column].strip()
            if not label:
                raise BadLine("empty label")
        else:
            if len(columns) < self.num_texts or (self.label_column is not None and len(columns) != self.num_texts):
                raise BadLine(f"expected {self.num_texts} column(s) in this unlabelled file, got {len(columns)}")
            texts = [c.strip() for c in columns[: self.num_texts]] if self.label_column is not None \
                else [columns[c].strip() for c in self.text_columns]
            label = None
        for text in texts:
            if not text:
                raise BadLine("empty text")
        return texts, label


LABEL_COLUMN = Option("label_column", int, default=-1,
                      doc="column of the label (negative: from the end); null: the files have no labels")


@loaders.register("single")
class SingleLoader(Loader):
    """One text and an optional label per record."""

    options = [Option("text_column", int, default=0, doc="column of the text (negative: from the end)"),
               LABEL_COLUMN]


@loaders.register("pair")
class PairLoader(Loader):
    """Two texts (e.g. sentence pairs for matching or similarity) and an optional label per record."""

    options = [Option("text1_column", int, default=0, doc="column of the first text"),
               Option("text2_column", int, default=1, doc="column of the second text"),
               LABEL_COLUMN]
    text_keys = ("text1_column", "text2_column")


BREAK_MODES = ("none", "complete", "complete_doc", "eos")


@loaders.register("corpus")
class CorpusLoader(Loader):
    """Unlabelled running text for language-model pretraining: one sentence or paragraph per line,
    a blank line between documents. ``break_mode`` says how lines become samples of up to max_len tokens.
    """

    options = [Option("break_mode", str, default="complete", choices=BREAK_MODES,
                      doc="none: cut the token stream into full blocks, ignoring line and document ends; "
                          "complete: fill blocks with whole lines, crossing documents; complete_doc: whole "
                          "lines, never crossing a document end; eos: one line per sample (truncated)")]
    text_keys = ()
    is_corpus = True

    def __init__(self, args: Any) -> None:
        self.args = args
        self.text_columns, self.label_column, self.num_texts = [0], None, 1

    def is_labelled(self, columns: list[str]) -> bool:
        return False

    def fields(self, columns: list[str], labelled: bool) -> tuple[list[str], str | None]:
        # An empty text marks a document boundary; the processor's assembler handles it.
        return [columns[0].strip() if columns else ""], None
