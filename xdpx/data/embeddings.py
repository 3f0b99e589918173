"""Pretrained word embeddings (text format: ``word v1 v2 ...`` per line, an optional ``count dim``
header) -> data_dir/embeddings.npy, float32 [vocab_size, dim] in vocabulary order."""

from __future__ import annotations

from collections.abc import Iterator

from xdpx import io
from xdpx.data.dictionary import Dictionary


def _rows(path: str) -> Iterator[tuple[str, list[str]]]:
    with io.open(path, errors="replace") as f:
        for number, line in enumerate(f):
            parts = line.rstrip().split(" ")
            if number == 0 and len(parts) == 2 and all(p.isdigit() for p in parts):
                continue  # word2vec header
            if len(parts) > 1:
                yield parts[0], parts[1:]


def embedding_words(path: str) -> set[str]:
    """The words of an embedding file (for ``ignore_in_emb``: they join the vocabulary regardless of threshold)."""
    return {word for word, _ in _rows(path)}


def write_embeddings(path: str, dictionary: Dictionary, out_path: str, seed: int) -> int:
    """Rows of known words copied, the others drawn from N(0, std of the file) with ``seed``, pad row 0.
    Returns how many vocabulary words the file had."""
    import numpy as np  # lazy: x-prepro --dry starts without numpy

    found: dict[int, list[float]] = {}
    dim = None
    for word, values in _rows(path):
        dim = dim or len(values)
        index = dictionary.index.get(word)
        if index is not None and index not in found and len(values) == dim:
            found[index] = [float(v) for v in values]
    if dim is None:
        raise ValueError(f"no vectors in {path}")
    known = np.array(list(found.values()), dtype=np.float32).reshape(-1, dim)
    std = float(known.std()) if len(known) else 0.1
    matrix = np.random.default_rng(seed).normal(0, std, (len(dictionary), dim)).astype(np.float32)
    for index, vector in found.items():
        matrix[index] = vector
    matrix[dictionary.pad_index] = 0
    with io.open(out_path, "wb") as f:
        np.save(f, matrix)
    return len(found)
