"""Word vectors for a word-level student from the teacher's own input embeddings (optional; docs/distill.md).

A TextCNN over words starts from random vectors; the teacher has a 384-wide WordPiece embedding table.
Each word of the training texts gets the mean of the teacher's vectors of its WordPiece pieces (uncased,
as the teacher reads it), written in the text format x-prepro's ``pretrained_embeddings`` reads
(``word v1 ... v384``). No other data or model is involved: the vectors are the pretrained MiniLM's.

    python examples/distill/teacher_embeddings.py examples/data/full/polarity/train.txt \
        outputs/pretrained/all-MiniLM-L6-v2 outputs/distill/minilm_words.txt --text-column 1

With ``--pieces`` the source is not read: every WordPiece of the teacher's vocabulary gets its own row, for a
student that reads the teacher's WordPiece tokens (x-prepro ``tokenizer: bert`` on the teacher's vocab.txt),
so no word of dev or test is unknown to it.

    python examples/distill/teacher_embeddings.py - outputs/pretrained/all-MiniLM-L6-v2 \
        outputs/distill/minilm_pieces.txt --pieces

``--dim N`` keeps the table's first N principal components (an SVD of the centred table): a student of
width N instead of 384, whose convolutions cost N/384 as much at serving time.
"""

from __future__ import annotations

import argparse
import os


def main(argv: list[str] | None = None) -> int:
    import numpy as np
    from safetensors import safe_open
    from tokenizers import Tokenizer

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="tab-separated training file (its words get vectors)")
    parser.add_argument("model", help="a BERT directory: tokenizer.json and model.safetensors")
    parser.add_argument("output")
    parser.add_argument("--text-column", type=int, default=0)
    parser.add_argument("--pieces", action="store_true", help="one row per WordPiece of the vocabulary")
    parser.add_argument("--dim", type=int, default=None, help="keep the first DIM principal components")
    a = parser.parse_args(argv)
    with safe_open(os.path.join(a.model, "model.safetensors"), "np") as f:
        name = next(k for k in f.keys() if k.endswith("word_embeddings.weight"))
        table = f.get_tensor(name)
    if a.dim:
        centred = table - table.mean(axis=0)
        _, _, components = np.linalg.svd(centred, full_matrices=False)
        table = centred @ components[: a.dim].T
    if a.pieces:
        with open(os.path.join(a.model, "vocab.txt"), encoding="utf-8") as f:
            pieces = [line.rstrip("\n") for line in f]
        with open(a.output, "w", encoding="utf-8") as out:
            for piece, vector in zip(pieces, table.astype(np.float64)):
                out.write(piece + " " + " ".join(f"{v:.6g}" for v in vector) + "\n")
        print(f"{a.output}: {len(pieces)} pieces, {table.shape[1]} dimensions")
        return 0
    tokenizer = Tokenizer.from_file(os.path.join(a.model, "tokenizer.json"))
    with open(a.source, encoding="utf-8") as f:
        words = sorted({w for line in f if line.strip() for w in line.rstrip("\n").split("\t")[a.text_column].split()})
    with open(a.output, "w", encoding="utf-8") as out:
        for word in words:
            ids = tokenizer.encode(word, add_special_tokens=False).ids
            if ids:
                vector = table[ids].mean(axis=0)
                out.write(word + " " + " ".join(f"{v:.6g}" for v in vector.astype(np.float64)) + "\n")
    print(f"{a.output}: {len(words)} words, {table.shape[1]} dimensions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
