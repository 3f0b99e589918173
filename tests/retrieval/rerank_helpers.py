"""The tiny cross-encoder of the rerank tests: hard negatives mined with the tiny bi-encoder run on the
committed train / dev pairs, written as labelled pairs by x-script rerank_pairs, through x-prepro (the
example's loader pair with processor pair, words as tokens) and x-train: re2 of width 32 from random
weights, cross_entropy over the labels 1 / 0. (A 2-layer BERT pair model of width 32 from random weights
stayed at loss 0.693 for 10 epochs on these 318 pairs: attention that matches words across the two texts
does not form from scratch in that little; re2's alignment layer does, dev AUC about 0.64 in 6 epochs.)"""

from __future__ import annotations

import json
from pathlib import Path

from retrieval_helpers import REPO, SAMPLE, run_killable

from tests.train.train_helpers import write_config
from xdpx.cli import run_chain, x_script

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
