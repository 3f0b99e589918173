"""Augment a training set for distillation (Tang et al., 2019, "Distilling Task-Specific Knowledge from BERT
into Simple Neural Networks", section 3.3): new, unlabelled sentences near the real ones, which the teacher
then scores (x-pred distill: true), so the student sees far more of the teacher's function than the labelled
set shows.

Per word of a sentence, with a random u ~ U(0, 1): u < p_mask: the word becomes [MASK]; p_mask <= u <
p_mask + p_swap: another word of the training set, drawn by its frequency (the paper draws a word of the same
part of speech; no tagger is needed here). Then, with probability p_ngram, only a random n-gram (n from 1 to
5) of the result is kept. Each sentence gives ``--copies`` variants; duplicates and the originals are
dropped. Deterministic for a given --seed.

    python examples/distill/augment.py examples/data/full/polarity/train.txt outputs/distill/aug/train_aug.txt \
        --text-column 1 --copies 10
"""

from __future__ import annotations

import argparse
import random
from collections import Counter


def variants(words: list[str], rng: random.Random, vocabulary: list[str], weights: list[int], p_mask: float,
             p_swap: float, p_ngram: float) -> list[str]:
    out = []
    for word in words:
        u = rng.random()
        if u < p_mask:
            out.append("[MASK]")
        elif u < p_mask + p_swap:
            out.append(rng.choices(vocabulary, weights)[0])
        else:
            out.append(word)
    if rng.random() < p_ngram and len(out) > 1:
        n = rng.randint(1, min(5, len(out)))
        start = rng.randint(0, len(out) - n)
        out = out[start: start + n]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="tab-separated training file")
    parser.add_argument("output", help="where the unlabelled sentences go, one per line")
    parser.add_argument("--text-column", type=int, default=0)
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--p-mask", type=float, default=0.1)
    parser.add_argument("--p-swap", type=float, default=0.1)
    parser.add_argument("--p-ngram", type=float, default=0.25)
    parser.add_argument("--seed", type=int, default=1)
    a = parser.parse_args(argv)
    with open(a.source, encoding="utf-8") as f:
        sentences = [line.rstrip("\n").split("\t")[a.text_column] for line in f if line.strip()]
    counts = Counter(w for s in sentences for w in s.split())
    vocabulary, weights = list(counts), list(counts.values())
    rng = random.Random(a.seed)
    seen = set(sentences)
    kept = []
    for sentence in sentences:
        words = sentence.split()
        for _ in range(a.copies):
            text = " ".join(variants(words, rng, vocabulary, weights, a.p_mask, a.p_swap, a.p_ngram))
            if text and text not in seen:
                seen.add(text)
                kept.append(text)
    with open(a.output, "w", encoding="utf-8") as f:
        f.writelines(text + "\n" for text in kept)
    print(f"{a.output}: {len(kept)} sentences from {len(sentences)} ({a.copies} tries each, duplicates dropped)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
