"""The tiny cross-encoder of the rerank tests: hard negatives mined with the tiny bi-encoder run on the
committed train / dev pairs, written as labelled pairs by x-script rerank_pairs, through x-prepro (the
example's loader pair with processor pair, words as tokens) and x-train: re2 of width 32 from random
weights, cross_entropy over the labels 1 / 0. (A 2-layer BERT pair model of width 32 from random weights
stayed at loss 0.693 for 10 epochs on these 318 pairs: attention that matches words across the two texts
does not form from scratch in that little; re2's alignment layer does, dev AUC about 0.64 in 6 epochs.)"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
from retrieval_helpers import REPO, SAMPLE, run_killable

from tests.train.train_helpers import write_config
from xdpx.cli import run_chain, x_script
from xdpx.inference.rerank import Reranker

RERANKER = {"model": "re2", "embedding_dim": 32, "hidden_size": 32, "blocks": 1, "dropout": 0.0,
            "loss": "cross_entropy", "batch_size": 16, "learning_rate": 3e-3, "max_epoch": 6, "eval_interval": 20,
            "major_metric": "auc", "log_interval": 20, "save_best_only": True, "save_last_only": True}


def rerank_data(root: Path, bi_encoder: Path) -> Path:
    """root/raw/{train,dev}.tsv (labelled pairs) through x-prepro into root/data."""
    (root / "raw").mkdir(parents=True)
    for split in ("train", "dev"):
        triplets = root / f"{split}.triplets.tsv"
        assert x_script(["mine_negatives", str(bi_encoder), str(SAMPLE / f"{split}.tsv"), str(triplets),
                         "--k", "10", "--max-score", "0.99"]) == 0
        assert x_script(["rerank_pairs", str(triplets), str(root / "raw" / f"{split}.tsv")]) == 0
    config = {"__parent__": str(REPO / "examples/retrieval/prepro_rerank_bert"), "data_source": str(root / "raw"),
              "data_files": {"train.tsv": "train", "dev.tsv": "dev"}, "data_dir": str(root / "data"),
              "processor": "pair", "tokenizer": "space", "vocab_file": None, "threshold": 0, "workers": 1}
    (root / "prepro.json").write_text(json.dumps(config))
    assert run_chain(["x-prepro", str(root / "prepro.json")]) == 0
    return root / "data"


def train_reranker(root: Path, data_dir: Path) -> Path:
    assert run_killable(write_config(root / "rerank.json", data_dir, root / "reranker", base=RERANKER)) == 0
    return root / "reranker"


def read_tsv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def search_pred(root: Path, run: Path, out: str, **options: object) -> list[dict[str, str]]:
    """x-pred's search of root/queries.txt in root/corpus.txt with ``run`` (and ``options``): the rows written."""
    config = {"save_dir": str(run), "predict_file_map": {str(root / "queries.txt"): str(root / out)},
              "search_corpus": str(root / "corpus.txt"), **options}
    (root / "pred.json").write_text(json.dumps(config))
    assert run_chain(["x-pred", str(root / "pred.json")]) == 0
    return read_tsv(root / out)


def ranks_by_hand(order: list[list[int]]) -> dict[str, float]:
    """recall@1, MRR@10 and NDCG@10 of rankings where query i's one relevant document is document i."""
    ranks = [row.index(i) + 1 if i in row[:10] else None for i, row in enumerate(order)]
    return {"recall_at_1": float(np.mean([r == 1 for r in ranks])),
            "mrr_at_10": float(np.mean([1 / r if r else 0.0 for r in ranks])),
            "ndcg_at_10": float(np.mean([1 / np.log2(r + 1) if r else 0.0 for r in ranks]))}


def stages_by_hand(root: Path, bi_encoder: Path, reranker: Path, rows: list[list[str]],
                   rerank_k: int = 5) -> tuple[np.ndarray, list[list[int]], np.ndarray]:
    """The dev BEIR folder's two stages computed outside x-eval: (cosines [query, document] from the
    bi-encoder's x-pred embeddings of the pairs, each query's 10 nearest documents, the reranker's scores of
    each query's first ``rerank_k``, query by query)."""
    (root / "pairs.tsv").write_text("".join("\t".join(r) + "\n" for r in rows))
    (root / "pred.json").write_text(json.dumps({"save_dir": str(bi_encoder), "binary": True,
                                                "predict_file_map": {str(root / "pairs.tsv"): str(root / "pairs.npz")}}))
    assert run_chain(["x-pred", str(root / "pred.json")]) == 0
    embeddings = np.load(root / "pairs.npz")["embeddings"].astype(np.float64)
    cosines = embeddings[:, 0] @ embeddings[:, 1].T
    first = [list(np.argsort(-row, kind="stable")[:10]) for row in cosines]
    scores = Reranker.load(str(reranker)).score([(rows[q][0], rows[d][1]) for q in range(len(rows))
                                                 for d in first[q][:rerank_k]])
    return cosines, first, scores
