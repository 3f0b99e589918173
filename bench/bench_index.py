"""x-script build_index's index kinds side by side: exact, HNSW, IVF, int8 and binary.

    python examples/retrieval/prepare_data.py          # once: the STS-B retrieval split
    python bench/bench_index.py [--run outputs/runs/retrieval_minilm] [--sweep]

The texts are the distinct sentences (queries and positives) of the STS-B retrieval split's three files
(examples/data/full/stsb_retrieval; the committed sample examples/retrieval/data when it is absent),
embedded once with the run (``--run``, a bi-encoder: build_index's own embedding code) and cached in
``--cache``. For each kind (FAISS, build_index's defaults, xdpx/runtime/index_kinds.py): build time (train
and add), query time per query (every indexed vector as a query, k 10, one batch, best of ``--repeats``),
recall@10 against the exact float32 search (xdpx/runtime/index_kinds.recall_at_k: all the vectors as
queries) and the size of the vectors file on disk. ``--sweep`` adds HNSW efSearch and IVF nprobe values
around the defaults (how the defaults were chosen). Threads: FAISS's default (every core).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from xdpx.runtime.index_kinds import KindIndex, default_params, recall_at_k  # noqa: E402
from xdpx.runtime.vector_index import FaissIndex  # noqa: E402

FULL, SAMPLE = "examples/data/full/stsb_retrieval", "examples/retrieval/data"
KINDS = [("exact", "none"), ("hnsw", "none"), ("ivf", "none"), ("exact", "int8"), ("exact", "binary"),
         ("hnsw", "int8")]


def texts_of(folder: str) -> list[str]:
    texts: dict[str, None] = {}
    for name in ("train.tsv", "dev.tsv", "test.tsv"):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            for line in f:
                cells = line.rstrip("\n").split("\t")
                texts.update(dict.fromkeys(c.strip() for c in cells[:2] if c.strip()))
    return list(texts)


def embeddings(run: str, texts: list[str], cache: str) -> np.ndarray:
    if os.path.exists(cache):
        vectors = np.load(cache)
        if len(vectors) == len(texts):
            return vectors
    from xdpx.scripts.build_index import embed_texts, load_bi_encoder

    started = time.time()
    predictor, _ = load_bi_encoder(run, "<best>", None)
    vectors = embed_texts(predictor, texts, "bench_index")
    print(f"# embedded {len(texts)} texts in {time.time() - started:.0f}s -> {cache}")
    os.makedirs(os.path.dirname(cache) or ".", exist_ok=True)
    np.save(cache, vectors)
    return vectors


def measure(vectors: np.ndarray, kind: str, quantize: str, params: dict[str, int] | None,
            repeats: int) -> tuple[float, float, float, int]:
    """(build s, query us per query, recall@10, bytes on disk)."""
    started = time.perf_counter()
    if kind == "exact" and quantize == "none":
        index: FaissIndex | KindIndex = FaissIndex(vectors.shape[1])
    else:
        index = KindIndex(vectors.shape[1], kind, quantize, params if params is not None
                          else default_params(kind, len(vectors)))
    index.add(vectors)
    build = time.perf_counter() - started
    query = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        index.search(vectors, 10)
        query = min(query, (time.perf_counter() - started) / len(vectors) * 1e6)
    recall, _ = recall_at_k(vectors, index, 10, sample=len(vectors))
    with tempfile.TemporaryDirectory() as folder:
        index.save(folder)
        size = os.path.getsize(os.path.join(folder, index.file_name))
    return build, query, recall, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", default="outputs/runs/retrieval_minilm")
    parser.add_argument("--cache", default="outputs/bench/index_vectors.npy")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sweep", action="store_true")
    args = parser.parse_args()
    folder = FULL if os.path.isdir(FULL) else SAMPLE
    texts = texts_of(folder)
    vectors = embeddings(args.run, texts, args.cache)
    print(f"# {len(texts)} distinct texts of {folder}, dim {vectors.shape[1]}, run {args.run}; "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    print("| index | quantize | parameters | build (ms) | query (us/query) | recall@10 vs exact | size on disk |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    rows = [(kind, quantize, None) for kind, quantize in KINDS]
    if args.sweep:
        rows += [("hnsw", "none", {"M": m, "ef_search": ef}) for m in (16, 32) for ef in (16, 32, 64, 128)]
        nlist = default_params("ivf", len(vectors))["nlist"]
        rows += [("ivf", "none", {"nlist": nlist, "nprobe": p}) for p in (1, 2, 4, 8, 16) if p <= nlist]
    for kind, quantize, params in rows:
        build, query, recall, size = measure(vectors, kind, quantize, params, args.repeats)
        shown = params if params is not None else default_params(kind, len(vectors))
        described = ", ".join(f"{k} {v}" for k, v in shown.items()) or "-"
        print(f"| {kind} | {quantize} | {described} | {build * 1e3:.1f} | {query:.1f} | {recall:.4f} | "
              f"{size / 1024:.0f} KiB |")


if __name__ == "__main__":
    main()
