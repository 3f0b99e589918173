"""Word embeddings with optional pretrained vectors (x-prepro's text file) and optional freezing."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


def load_embedding_file(path: str, vocab_size: int, dim: int) -> np.ndarray:
    """Read ``word v1 ... v_dim`` lines, line i being token id i (the order of vocab.txt).

    The vector is the last ``dim`` fields, so a token containing spaces still parses. A word2vec-style
    header line ("count dim") is skipped. Any mismatch with the vocabulary is an error: silently
    shifted rows would train on the wrong vectors.
    """
    from xdpx import io

    rows: list[np.ndarray] = []
    with io.open(path, "r", encoding="utf-8") as f:
        for line_number, line in enumerate(f, start=1):
            fields = line.rstrip("\r\n").split(" ")
            if line_number == 1 and len(fields) == 2 and all(x.isdigit() for x in fields):
                continue
            if len(fields) < dim + 1:
                raise ValueError(f"embedding_file {path!r} line {line_number}: expected a word and {dim} "
                                 f"numbers (embedding_dim), got {len(fields)} fields")
            try:
                rows.append(np.asarray(fields[-dim:], dtype=np.float32))
            except ValueError as err:
                raise ValueError(f"embedding_file {path!r} line {line_number}: {err}") from None
    if len(rows) != vocab_size:
        raise ValueError(f"embedding_file {path!r} has {len(rows)} vectors; vocab.txt has {vocab_size} "
                         "entries (the file must list every vocabulary entry in order)")
    return np.stack(rows)


class Embedding(nn.Module):
    """Token ids ``[B, L]`` -> vectors ``[B, L, dim]``; the padding row is zero and gets no gradient."""

    def __init__(self, vocab_size: int, dim: int, pad_index: int, embedding_file: str | None = None,
                 fix_embeddings: bool = False) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, dim, padding_idx=pad_index)
        nn.init.normal_(self.embedding.weight, std=dim**-0.5)
        with torch.no_grad():
            if embedding_file:
                matrix = load_embedding_file(embedding_file, vocab_size, dim)
                self.embedding.weight.copy_(torch.from_numpy(matrix))
            self.embedding.weight[pad_index].zero_()
        self.embedding.weight.requires_grad_(not fix_embeddings)

    @property
    def dim(self) -> int:
        return self.embedding.embedding_dim

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.embedding(tokens)
