"""Targets: the target map (target_map.txt, one label per line, the line number is the class id) and
the conversion of a label string into what is stored (class id, or a float for regression)."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

from xdpx import io
from xdpx.data.errors import BadLine
from xdpx.errors import UserError


class NovelTarget(BadLine):
    """A label that is not in the target map (x-eval's ignore_novel_target skips such lines and counts them)."""


class TargetMap:
    """Class labels <-> class ids. With ``unk`` (the processing option target_unk, one of ``labels``), a
    label not in the map is encoded as the class ``unk`` instead of being an error."""

    def __init__(self, labels: Iterable[str], unk: str | None = None, where: str = "the target map") -> None:
        self.labels = list(labels)
        self.index = {label: i for i, label in enumerate(self.labels)}
        if len(self.index) != len(self.labels):
            raise ValueError("the target map lists a label twice")
        if unk is not None and unk not in self.index:
            raise UserError(f"{where}: target_unk {unk!r} is not one of its labels {self.labels[:10]}: add it as a "
                            "line of target_map_file, or set target_unk to one of the labels")
        self.unk = unk

    @classmethod
    def load(cls, path: str, unk: str | None = None) -> TargetMap:
        with io.open(path) as f:
            return cls((line.rstrip("\r\n") for line in f if line.strip()), unk, where=path)

    def is_novel(self, label: str) -> bool:
        """Whether ``label`` is not in the map (it is then the unk class, or an error)."""
        return label not in self.index

    @classmethod
    def build(cls, counts: Counter[str], target_type: str, special_targets: Iterable[str] = (),
              unk: str | None = None) -> TargetMap:
        """``special_targets`` first; then, for ``text``, labels by frequency (ties alphabetical); for
        ``index``, labels by numeric value (they should be 0..n-1); ``unk`` (target_unk) last when the
        data does not hold it."""
        special = list(special_targets)
        rest = [label for label in counts if label not in special]
        if target_type == "index":
            bad = [label for label in rest if not _is_int(label)]
            if bad:
                raise BadLine(f"target_type 'index' needs integer labels, got {bad[:3]}")
            rest.sort(key=int)
        else:
            rest.sort(key=lambda label: (-counts[label], label))
        labels = special + rest
        return cls(labels + ([unk] if unk is not None and unk not in labels else []), unk)

    def encode_set(self, names: list[str]) -> list[int]:
        """Class ids of a multilabel sample's label names (each as :meth:`encode`), sorted, each once."""
        return sorted({self.encode(name) for name in names})

    def save(self, path: str) -> None:
        with io.open(path, "w") as f:
            f.writelines(f"{label}\n" for label in self.labels)

    def __len__(self) -> int:
        return len(self.labels)

    def encode(self, label: str) -> int:
        try:
            return self.index[label]
        except KeyError:
            if self.unk is not None:
                return self.index[self.unk]
            raise NovelTarget(f"label {label!r} is not in the target map {self.labels[:10]} (target_unk: a class "
                              "for such labels; x-eval's ignore_novel_target: skip them)") from None


# A label of the train splits is rare when seen fewer than max(RARE_LABEL_MIN, RARE_LABEL_SHARE x labelled
# samples) times: once in small data, under 0.1% of the samples in large data. A typo (`Pos` beside `pos`)
# or a stray value silently becomes a class the model can hardly learn, so x-prepro warns; rare classes
# may be real, so it is never an error.
RARE_LABEL_MIN = 2
RARE_LABEL_SHARE = 0.001


def rare_labels_warning(counts: Counter[str], shown: int = 5) -> str | None:
    """The warning x-prepro prints about the rare labels of ``counts`` (label -> samples of the train
    splits), or None: how many, the first ``shown`` with their counts, and the labels that differ from a
    more frequent one only by case or whitespace (the likely typos)."""
    total = sum(counts.values())
    bound = max(RARE_LABEL_MIN, math.ceil(RARE_LABEL_SHARE * total))
    rare = sorted((label for label, n in counts.items() if n < bound), key=lambda label: (counts[label], label))
    if not rare or len(rare) == len(counts):  # every label rare: tiny data, nothing stands out
        return None
    by_form: dict[str, list[str]] = {}
    for label in counts:
        by_form.setdefault(" ".join(label.split()).casefold(), []).append(label)
    hints = []
    for label in rare:
        twins = [t for t in by_form[" ".join(label.split()).casefold()] if t != label and counts[t] > counts[label]]
        if twins:
            twin = max(twins, key=lambda t: counts[t])
            hints.append(f"{label!r} ({counts[label]}) differs from {twin!r} ({counts[twin]}) only by case or "
                         "whitespace (a typo?)")
    listed = ", ".join(f"{label!r} ({counts[label]})" for label in rare[:shown])
    more = f" and {len(rare) - shown} more" if len(rare) > shown else ""
    text = (f"warning: target map: {len(rare)} of {len(counts)} labels are rare (seen fewer than {bound} times "
            f"in {total} labelled train samples): {listed}{more}; each is a class of its own")
    if hints:
        text += ". " + "; ".join(hints[:shown])
    return text + ". Fix the labels in the data if they are typos, or keep them if they are real classes"


def label_names(label: str, args: Any) -> list[str]:
    """The label names a label column holds: itself, or for ``target_type: multilabel`` the set it lists (a
    JSON list of strings, as the jsonl parser passes it on, or names joined by ``label_separator``), in order
    of first appearance, each once; an empty column is the empty set."""
    if hasattr(label, "names"):  # a label that knows its parts (NER: a tag sequence)
        return list(label.names())
    if args.get("target_type") != "multilabel":
        return [label]
    text = label.strip()
    if text.startswith("[") and text.endswith("]"):
        try:
            items = json.loads(text)
        except json.JSONDecodeError:
            items = None
        if isinstance(items, list) and all(isinstance(item, str) for item in items):
            return list(dict.fromkeys(item.strip() for item in items if item.strip()))
    names = (name.strip() for name in text.split(separator_of(args)))
    return list(dict.fromkeys(name for name in names if name))


# what a label set is often joined by; a name made of other names joined by one of these (and not by
# label_separator) is a set written with another separator, which would silently become a class of its own
OTHER_SEPARATORS = ("|", ",", ";", "/", "+", "\t")


def separator_of(args: Any) -> str:
    return args.get("label_separator") or "|"


def check_label_set(label: str, args: Any) -> list[str]:
    """The names of a multilabel column, refused (BadLine) when one holds label_separator: x-pred writes a
    sample's labels joined by it, so such a name could not be read back (it comes from a JSON list)."""
    names = label_names(label, args)
    separator = separator_of(args)
    for name in names:
        if separator in name:
            raise BadLine(f"label {name!r} contains label_separator {separator!r}: x-pred joins a sample's labels "
                          "with it, so this label could not be split back; rename the label, or set another "
                          "label_separator")
    return names


def joined_labels(counts: Counter[str], separator: str) -> list[tuple[str, str, list[str]]]:
    """(name, the separator, its parts) for each label name that is two or more other label names joined
    by a separator other than ``separator``: e.g. 'place,time' beside 'place' and 'time' with ``|``."""
    found = []
    for name in counts:
        for other in OTHER_SEPARATORS:
            if other == separator or other not in name:
                continue
            parts = [part.strip() for part in name.split(other)]
            if len(parts) >= 2 and all(part and part != name and part in counts for part in parts):
                found.append((name, other, parts))
                break
    return found


def joined_labels_problem(name: str, other: str, parts: list[str], count: int, separator: str) -> str:
    return (f"label {name!r} ({count} train samples) is the labels {parts} joined by {other!r}, but "
            f"label_separator is {separator!r}: it would be a class of its own. Join each set with {separator!r} "
            f"(or set label_separator: {other!r} if the whole data uses it)")


def without_joined_labels(counts: Counter[str], args: Any, say: Any) -> Counter[str]:
    """The train label counts of a multilabel target map, without sets written with another separator: such
    a set is an error naming label_separator, or with skip_bad_lines left out of the map (its lines are then
    bad lines: a label the map lacks)."""
    separator = separator_of(args)
    joined = joined_labels(counts, separator)
    if not joined:
        return counts
    problems = [joined_labels_problem(name, other, parts, counts[name], separator) for name, other, parts in joined]
    if not args.skip_bad_lines:
        raise UserError(f"{args.source('label_separator')}: key 'label_separator': {problems[0]}")
    for problem in problems:
        say(f"warning: {problem}: its lines are skipped as bad lines")
    return Counter({k: v for k, v in counts.items() if k not in {name for name, _, _ in joined}})


def _is_int(text: str) -> bool:
    try:
        int(text)
        return True
    except ValueError:
        return False


def regression_value(label: str) -> float:
    try:
        value = float(label)
    except ValueError:
        raise BadLine(f"target_type 'regression' needs a number, got label {label!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise BadLine(f"target {label!r} is not a finite number")
    return value
