"""Loaders: the columns of a record -> a sample's fields (text or texts, and the label when present).

Layouts are configured by column numbers (0-based; negative counts from the end):

    review text<TAB>pos          loader: single                            (defaults: text 0, label -1)
    1<TAB>a great film           loader: single, text_column: 1, label_column: 0
    g<TAB>f<TAB>y<TAB>id<TAB>4.2<TAB>s1<TAB>s2   loader: pair, text1_column: 5, text2_column: 6, label_column: 4

Whether a file is labelled is read from its first record: a record with exactly as many columns as the
loader has texts is unlabelled, and its texts are those columns in order (the same layout without the
label, as a prediction file has it). Later records must have the first record's number of columns: a
stray delimiter inside a text would otherwise shift the columns and make a piece of text the label.
Files whose records carry optional trailing columns (STS-B) set ``extra_columns: true``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from xdpx.config.options import Option, Rule
from xdpx.config.ranges import any_number
from xdpx.data import loaders
from xdpx.data.errors import BadLine
from xdpx.data.parsing import JsonValue
from xdpx.data.targets import check_label_set

# A label is a class name (or a number): a longer one is a text read as the label (wrong columns), and
# would fill target_map.txt, x-pred's label column and every message that names it.
MAX_LABEL_CHARS = 200


@dataclass(frozen=True)
class Layout:
    """What the first record of a file says about all of its records."""

    labelled: bool
    width: int | None = None  # its number of columns; None: not checked (a single record, e.g. x-serve)
    line: int = 1  # where it is, for messages


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def check_text(text: str, what: str = "text") -> str:
    """A text or label as read; a NUL character (binary data, or UTF-16 read as UTF-8) is a bad line, and so
    is a lone surrogate (a JSON escape such as "\\ud800" of half a UTF-16 pair): no file can store it as
    UTF-8. x-prepro, x-pred and x-serve check every text here."""
    if "\0" in text:
        raise BadLine(f"a NUL character in the {what} at position {text.index(chr(0))}: binary data, or a UTF-16 "
                      "file? (convert it to UTF-8)")
    found = _LONE_SURROGATE.search(text)
    if found:  # json.loads joins a valid pair into one character: any surrogate left is half of one
        raise BadLine(f"a lone surrogate (U+{ord(found.group()):04X}) in the {what} at position {found.start()}: "
                      "half of a UTF-16 pair, which is no character (fix the escapes of the JSON that holds it)")
    return text


def json_column(column: str, what: str = "text") -> str:
    """A column as the text or label it is to be: a text read from a JSON number, boolean or null is a bad
    line (not its str()), and so is a null label; a number or boolean label is taken (class ids,
    regression targets)."""
    if isinstance(column, JsonValue) and (what == "text" or column.kind == "null"):
        if column.source == "table":
            if what == "text":
                raise BadLine(f"{column.field} is empty, not a text" if column.kind == "null" else
                              f"{column.field} holds a {column.kind} ({column}), not a text: check `fields` (or "
                              "store the column as text)")
            raise BadLine(f"{column.field} (the label) is empty: give a label, or drop the row")
        shown = str(column) or "null"
        if what == "text":
            raise BadLine(f"{column.field} is a JSON {column.kind} ({shown}), not a string: a text must be a JSON "
                          "string (quote it, or check `fields` if this field is not a text)")
        raise BadLine(f"{column.field} (the label) is null: give a label, or leave the field out of every "
                      "record of an unlabelled file")
    return column


class Loader:
    """Base class. ``fields(columns, layout)`` -> (texts, label or None)."""

    options: list[Any] = []
    text_keys: tuple[str, ...] = ("text_column",)
    # A corpus groups lines into documents; its records are assembled into samples by the processor.
    is_corpus = False

    def __init__(self, args: Any) -> None:
        self.args = args
        self.text_columns = [getattr(args, key) for key in self.text_keys]
        self.label_column = args.get("label_column")
        self.num_texts = len(self.text_columns)
        self.extra_columns = bool(args.get("extra_columns"))

    def is_labelled(self, columns: list[str]) -> bool:
        return self.label_column is not None and len(columns) > self.num_texts

    def layout_of(self, columns: list[str], line: int = 1) -> Layout:
        return Layout(self.is_labelled(columns), len(columns), line)

    def fields(self, columns: list[str], layout: Layout) -> tuple[list[str], str | None]:
        if layout.labelled or self.label_column is None:
            used = [*self.text_columns] + ([self.label_column] if layout.labelled else [])
            needed = max(len(used), *(c + 1 if c >= 0 else -c for c in used))
            if len(columns) < needed:
                what = "texts and label" if layout.labelled else "texts"
                raise BadLine(f"expected at least {needed} columns ({what}), got {len(columns)}")
            if layout.width is not None and len(columns) != layout.width and not self.extra_columns:
                raise BadLine(f"{len(columns)} columns, but the first record of the file (line {layout.line}) has "
                              f"{layout.width}: a delimiter inside a text? (quote such fields, or set extra_columns: "
                              "true if records may carry optional trailing columns)")
            texts = [json_column(columns[c]).strip() for c in self.text_columns]
            label = None
            if layout.labelled:
                column = columns[self.label_column]
                multilabel = self.args.get("target_type") == "multilabel"
                if getattr(column, "kind", None) == "list" and not multilabel:
                    raise BadLine(f"{column.field} (the label) is a JSON list: set target_type: multilabel for "
                                  "label sets")
                value = json_column(column, "label")
                # a JSON number keeps its kind (its text has no spaces): x-prepro notes 1 beside "1"
                label = check_text(value if isinstance(value, JsonValue) else value.strip(), "label")
                if not label and not multilabel:  # multilabel: an empty label column is the empty set
                    raise BadLine("empty label")
                if len(label) > MAX_LABEL_CHARS and not multilabel:
                    raise BadLine(f"a label of {len(label):,} characters ({label[:40]!r}...), more than "
                                  f"{MAX_LABEL_CHARS}: a text in the label column? Check label_column (or fields)")
                if multilabel:
                    check_label_set(label, self.args)
        else:  # an unlabelled file in a labelled layout: exactly the texts, in order
            if len(columns) != self.num_texts:
                # said of a line of a file and of an x-serve request alike: both are texts without a label
                raise BadLine(f"expected {self.num_texts} text(s) without a label, got {len(columns)}")
            texts = [json_column(c).strip() for c in columns]
            label = None
        for text in texts:
            if not check_text(text):
                raise BadLine("empty text")
        return texts, label


LABEL_COLUMN = Option("label_column", int | None, default=-1, validate=any_number(),
                      doc="column of the label (negative: from the end); null: the files have no labels")
EXTRA_COLUMNS = Option("extra_columns", bool, default=False,
                       doc="records may have more (or fewer) columns than the first record of their file, e.g. "
                           "STS-B's optional source columns; the loader reads its columns by number and ignores "
                           "the rest. false: a record with another number of columns than the first is a bad "
                           "line (a delimiter inside a text would shift the columns). Needs column numbers >= 0")


def _distinct_columns(keys: tuple[str, ...]) -> Rule:
    def check(args: Any) -> bool:
        numbers = [args.get(k) for k in keys if args.get(k) is not None]
        return len(numbers) == len(set(numbers))

    return Rule(check, f"{', '.join(keys)} must name different columns", keys=keys)


def _counted_from_start(keys: tuple[str, ...]) -> Rule:
    def check(args: Any) -> bool:
        return not args.get("extra_columns") or all((args.get(k) or 0) >= 0 for k in keys)

    return Rule(check, "extra_columns: true needs column numbers counted from the start (>= 0): with a varying "
                       f"number of columns a negative one names different columns in different records ({', '.join(keys)})",
                keys=("extra_columns", *keys))


@loaders.register("single")
class SingleLoader(Loader):
    """One text and an optional label per record."""

    options = [Option("text_column", int, default=0, validate=any_number(),
                      doc="column of the text (negative: from the end)"),
               LABEL_COLUMN, EXTRA_COLUMNS,
               _distinct_columns(("text_column", "label_column")),
               _counted_from_start(("text_column", "label_column"))]


@loaders.register("pair")
class PairLoader(Loader):
    """Two texts (e.g. sentence pairs for matching or similarity) and an optional label per record."""

    options = [Option("text1_column", int, default=0, validate=any_number(), doc="column of the first text"),
               Option("text2_column", int, default=1, validate=any_number(), doc="column of the second text"),
               LABEL_COLUMN, EXTRA_COLUMNS,
               _distinct_columns(("text1_column", "text2_column", "label_column")),
               _counted_from_start(("text1_column", "text2_column", "label_column"))]
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

    def fields(self, columns: list[str], layout: Layout) -> tuple[list[str], str | None]:
        # An empty text marks a document boundary; the processor's assembler handles it.
        return [check_text(json_column(columns[0]).strip()) if columns else ""], None
