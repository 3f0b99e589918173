"""XDPX's bi-encoder training against sentence-transformers' own fit: the same all-MiniLM-L6-v2, the same STS-B
retrieval train pairs (1,406), the same loss (in-batch negatives: info_nce with temperature 0.05 =
MultipleNegativesRankingLoss with scale 20), batch 32, one epoch (44 updates), lr 2e-5 with 10% linear
warmup then linear decay, weight decay 0.01, gradients clipped at norm 5 (XDPX's default clip_norm; max_grad_norm for sentence-transformers).
Both models are then scored on the same BEIR folder (the STS-B retrieval test split,
examples/retrieval/prepare_data.py) with the same code (xdpx/metrics/ir.py on
normalised embeddings), and the training time of each gives samples/s. The sides run one after the other.

    sh examples/bert/link_minilm.sh && python examples/retrieval/prepare_data.py
    x-prepro examples/retrieval/prepro_retrieval_bert.hjson
    python bench/bench_st_fit.py [--out outputs/bench_st] [--xdpx-run outputs/bench_stages/inbatch]

The orders of the batches differ (each library shuffles with its own generator).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

MINILM = "outputs/pretrained/all-MiniLM-L6-v2"
PAIRS = "examples/data/full/stsb_retrieval/train.tsv"
BEIR = "examples/data/full/stsb_retrieval_beir/test"


def ndcg_of(encode, beir: str) -> dict[str, float]:
    from xdpx.data.beir import read_beir
    from xdpx.metrics.ir import corpus_metrics

    data = read_beir(beir)
    docs = encode([f"{t} {x}".strip() for t, x in data.corpus.values()])
    queries = encode(list(data.queries.values()))
    return corpus_metrics(queries @ docs.T, list(data.queries), list(data.corpus), data.qrels, [1, 10])


def st_side(out: str) -> dict[str, float]:
    from sentence_transformers import InputExample, SentenceTransformer, losses
    from torch.utils.data import DataLoader

    rows = [line.rstrip("\n").split("\t") for line in open(PAIRS, encoding="utf-8")]
    examples = [InputExample(texts=[q, p]) for q, p, _ in rows]
    model = SentenceTransformer(MINILM, device="cpu")
    loader = DataLoader(examples, shuffle=True, batch_size=32)
    started = time.perf_counter()
    model.fit(train_objectives=[(loader, losses.MultipleNegativesRankingLoss(model, scale=20.0))], epochs=1,
              warmup_steps=int(0.1 * len(loader)), optimizer_params={"lr": 2e-5}, weight_decay=0.01,
              scheduler="warmuplinear", max_grad_norm=5.0, show_progress_bar=False)
    seconds = time.perf_counter() - started
    metrics = ndcg_of(lambda texts: model.encode(texts, batch_size=64, normalize_embeddings=True,
                                                 convert_to_numpy=True).astype(np.float64), BEIR)
    return {"seconds": seconds, "samples_per_s": len(examples) / seconds, **metrics}


def xdpx_side(out: str, run: str | None = None) -> dict[str, float]:
    save_dir = os.path.join(out, "xdpx_run")
    config = json.dumps({"__parent__": "examples/retrieval/train_retrieval_minilm", "save_dir": save_dir,
                         "eval_interval": 1000})  # one evaluation, at the end
    if run:  # a run of the same config (train_retrieval_minilm as it is) trained before
        save_dir = run
    else:
        subprocess.run(["x-train", "-"], input=config, text=True, check=True)
    log = open(os.path.join(save_dir, "log.txt"), encoding="utf-8").read()
    training = float(log.rsplit("training time ", 1)[1].split("s", 1)[0])
    eval_file = os.path.join(out, "xdpx_eval.tsv")
    subprocess.run(["x-eval", "-"], input=json.dumps({"save_dir": save_dir, "valid_subset": BEIR,
                                                      "save_to_file": eval_file, "save_mode": "w"}),
                   text=True, check=True)
    header, row = open(eval_file, encoding="utf-8").read().splitlines()[:2]
    metrics = {k: float(v) for k, v in zip(header.split("\t"), row.split("\t")) if k.endswith(("_at_1", "_at_10"))}
    return {"seconds": training, "samples_per_s": 1406 / training, **metrics}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="outputs/bench_st")
    parser.add_argument("--sides", nargs="+", default=["xdpx", "st"], choices=["xdpx", "st"])
    parser.add_argument("--xdpx-run", default=None, help="score this run of train_retrieval_minilm instead of "
                        "training one (its log.txt gives the training time)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    results = {}
    for side in args.sides:
        results[side] = xdpx_side(args.out, args.xdpx_run) if side == "xdpx" else st_side(args.out)
        print(side, json.dumps(results[side]), flush=True, file=sys.stderr)
    print("side\ttraining_s\tsamples_per_s\tndcg_at_10\tmrr_at_10\trecall_at_1\trecall_at_10")
    for side, r in results.items():
        print(side, f"{r['seconds']:.1f}", f"{r['samples_per_s']:.2f}",
              *(f"{r[m]:.4f}" for m in ("ndcg_at_10", "mrr_at_10", "recall_at_1", "recall_at_10")), sep="\t")


if __name__ == "__main__":
    main()
