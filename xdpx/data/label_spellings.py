"""Labels that are one label spelt two ways, found when x-prepro builds the target map from the train splits.

- ``positive`` beside ``Positive`` or ``very  positive`` beside ``very positive`` (case, or the whitespace
  inside; the ends are stripped when read): a typo that would silently become a class of its own. An error
  naming the file:line of the rarer spelling, both spellings and the fix; ``allow_label_variants: true``
  keeps them as distinct classes where a user really has such labels. With ``skip_bad_lines`` the rarer
  spelling is left out of the target map instead, so its lines are bad lines (counted, quoted in log.txt).
- ``1`` (a JSON number) beside ``"1"`` (a JSON string), or ``true`` beside ``"true"``: clearly one label (the
  label is its text, so both are one class already); x-prepro says so in a note.

Very long labels are refused where they are read (xdpx/data/loading.py, :data:`MAX_LABEL_CHARS`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from xdpx.config.options import Option
from xdpx.errors import UserError

ALLOW_LABEL_VARIANTS = Option(
    "allow_label_variants", bool, default=False,
    doc="labels of the train splits that differ only by case or inner whitespace (positive, Positive) are "
        "distinct classes. false: x-prepro stops at the rarer spelling, naming file:line and both spellings "
        "(a typo would otherwise become a class of its own); with skip_bad_lines its lines are skipped")

# (label name, how it was written: "" for a string, else the JSON kind: number, boolean) -> first file:line
FirstSeen = dict[tuple[str, str], str]


def spelling_key(label: str) -> str:
    """What two spellings of one label share: case folded, inner whitespace runs as one space."""
    return " ".join(label.split()).casefold()


def variants(counts: Counter[str]) -> list[tuple[str, str]]:
    """(variant, main spelling) for each label that differs from a more frequent one (ties: the
    alphabetically first is the main one) only by case or whitespace, the rarest variants first."""
    groups: dict[str, list[str]] = {}
    for label in counts:
        groups.setdefault(spelling_key(label), []).append(label)
    found = []
    for spellings in groups.values():
        if len(spellings) > 1:
            main, *others = sorted(spellings, key=lambda label: (-counts[label], label))
            found += [(other, main) for other in others]
    return sorted(found, key=lambda pair: (counts[pair[0]], pair[0]))


def first_place(first_seen: FirstSeen, label: str) -> str:
    """Where ``label`` was first seen, however it was written."""
    places = [where for (name, _), where in first_seen.items() if name == label]
    return places[0] if places else "the train splits"


def variant_problem(variant: str, main: str, counts: Counter[str], first_seen: FirstSeen) -> str:
    return (f"{first_place(first_seen, variant)}: label {variant!r} ({counts[variant]} train sample(s)) differs from "
            f"{main!r} ({counts[main]}, first at {first_place(first_seen, main)}) only by case or whitespace: it "
            f"would be a class of its own. Write it {main!r} in the data (or set allow_label_variants: true if "
            "they are different classes)")


def json_kind_notes(first_seen: FirstSeen) -> list[str]:
    """A note for each label written both as a JSON number or boolean and as a string: one class."""
    as_string = {name: where for (name, kind), where in first_seen.items() if kind == ""}
    return [f"note: label {name!r} is written both as a JSON {kind} ({where}) and as a string ({as_string[name]}): "
            "one class, the label being its text"
            for (name, kind), where in first_seen.items() if kind and name in as_string]


def checked_counts(counts: Counter[str], first_seen: FirstSeen, args: Any, say: Any) -> Counter[str]:
    """The train label counts the target map is built from: a variant spelling stops the run (UserError, the
    file:line of its first sample), or with skip_bad_lines is left out (its lines are then bad lines);
    ``allow_label_variants`` keeps every spelling. Notes on JSON numbers beside strings go to ``say``."""
    for note in json_kind_notes(first_seen):
        say(note)
    if args.get("allow_label_variants") or args.get("target_type") not in ("text", "multilabel"):
        return counts
    found = variants(counts)
    if not found:
        return counts
    problems = [variant_problem(variant, main, counts, first_seen) for variant, main in found]
    if not args.get("skip_bad_lines"):
        raise UserError(problems[0])
    for problem in problems:
        say(f"warning: {problem}: its lines are skipped as bad lines")
    return Counter({label: n for label, n in counts.items() if label not in {variant for variant, _ in found}})
