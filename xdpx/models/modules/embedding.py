"""Word embeddings with optional pretrained vectors and optional freezing.

The vectors come from x-prepro's ``data_dir/embeddings.npy`` (float32 ``[vocab_size, dim]``, row i for
token id i) or from a text file of ``word v1 ... v_dim`` lines in the order of vocab.txt.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from xdpx import io

NPY_MAGIC = b"\x93NUMPY"


def load_embedding_file(path: str, vocab_size: int, dim: int) -> np.ndarray:
    """The ``[vocab_size, dim]`` float32 matrix of a .npy or text embedding file, checked against the model."""
    with io.open(path, "rb") as f:
        is_npy = f.read(len(NPY_MAGIC)) == NPY_MAGIC
    if is_npy:
        with io.open(path, "rb") as f:
            matrix = np.load(f, allow_pickle=False)  # data, never pickled objects
        if matrix.ndim != 2 or not np.issubdtype(matrix.dtype, np.floating):
            raise ValueError(f"embedding_file {path!r}: expected a 2-D float matrix, got {matrix.dtype} "
                             f"of shape {matrix.shape}")
    else:
        matrix = read_text_embeddings(path, dim)
    if matrix.shape[1] != dim:
        raise ValueError(f"embedding_file {path!r} has vectors of width {matrix.shape[1]}; "
                         f"embedding_dim is {dim}")
    if matrix.shape[0] != vocab_size:
        raise ValueError(f"embedding_file {path!r} has {matrix.shape[0]} vectors; vocab.txt has {vocab_size} "
                         "entries (the file must list every vocabulary entry in order)")
    return matrix.astype(np.float32)


def read_text_embeddings(path: str, dim: int) -> np.ndarray:
    """Read ``word v1 ... v_dim`` lines, line i being token id i (the order of vocab.txt).

    The vector is the last ``dim`` fields, so a token containing spaces still parses. A word2vec-style
    header line ("count dim") is skipped. Any mismatch with the vocabulary is an error: silently
    shifted rows would train on the wrong vectors.
    """
    rows: list[np.ndarray] = []
    with io.open(path, "r", encoding="utf-8") as f:
        for line_number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            fields = line.rstrip().split(" ")
            if line_number == 1 and len(fields) == 2 and all(x.isdigit() for x in fields):
                continue
            if len(fields) < dim + 1:
                raise ValueError(f"embedding_file {path!r} line {line_number}: expected a word and {dim} "
                                 f"numbers (embedding_dim), got {len(fields)} fields")
            try:
                rows.append(np.asarray(fields[-dim:], dtype=np.float32))
            except ValueError as err:
                raise ValueError(f"embedding_file {path!r} line {line_number}: {err}") from None
    return np.stack(rows) if rows else np.zeros((0, dim), dtype=np.float32)


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
