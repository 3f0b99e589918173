#!/bin/sh
# NDCG@10 of the three retrieval stages on the STS-B retrieval test set as a BEIR folder (1,337 documents,
# 309 queries; python examples/retrieval/prepare_data.py): all-MiniLM-L6-v2 fine-tuned with in-batch
# negatives, the same with mined hard negatives, and the second reranked by a MiniLM cross-encoder trained on
# the mined pairs (1 epoch, max_len 64), reranking the top 10. Real x-train / x-eval runs (docs/tasks.md, "Rerankers").
#   sh examples/bert/link_minilm.sh && python examples/retrieval/prepare_data.py
#   sh bench/bench_retrieval_stages.sh            # outputs/bench_stages/*.tsv, the table printed at the end
# The harder set (the same queries among 15,160 documents: every distinct STS-B sentence; docs/data.md):
#   BEIR=examples/data/full/stsb_retrieval_beir_all/test sh bench/bench_retrieval_stages.sh
# EVAL_ONLY=1 skips the preprocessing and training and evaluates the runs already in outputs/bench_stages
# (the training does not depend on the BEIR folder); the eval files of a BEIR other than the default are
# named eval_<its parent folder>_<stage>.tsv.
set -e
out=outputs/bench_stages
beir=${BEIR:-examples/data/full/stsb_retrieval_beir/test}
tag=$(basename "$(dirname "$beir")")
case $tag in stsb_retrieval_beir) ev=$out/eval ;; *) ev=$out/eval_$tag ;; esac
if [ -z "$EVAL_ONLY" ]; then
mkdir -p $out/raw_triplets $out/raw_rerank
x-prepro examples/retrieval/prepro_retrieval_bert.hjson
# 1. in-batch negatives (examples/retrieval/train_retrieval_minilm.hjson, 1 epoch)
x-train - <<EOF2
{__parent__: examples/retrieval/train_retrieval_minilm, save_dir: $out/inbatch}
EOF2
# 2. hard negatives mined with run 1 (train and dev), then the same training from MiniLM with them
for split in train dev; do
  x-script mine_negatives $out/inbatch examples/data/full/stsb_retrieval/$split.tsv $out/raw_triplets/$split.tsv --k 20
done
x-prepro - <<EOF2
{__parent__: examples/retrieval/prepro_retrieval_bert, data_source: $out/raw_triplets,
 data_files: {train.tsv: train, dev.tsv: dev}, data_dir: $out/data_triplets, loader: triplet, label_column: 3}
EOF2
x-train - <<EOF2
{__parent__: examples/retrieval/train_retrieval_minilm, data_dir: $out/data_triplets, save_dir: $out/mined}
EOF2
# 3. a cross-encoder on the mined pairs (examples/retrieval/train_rerank_minilm.hjson, 1 epoch), reranking the top 10
for split in train dev; do
  x-script rerank_pairs $out/raw_triplets/$split.tsv $out/raw_rerank/$split.tsv
done
x-prepro - <<EOF2
{__parent__: examples/retrieval/prepro_rerank_bert, data_source: $out/raw_rerank, data_dir: $out/data_rerank, max_len: 64}
EOF2
x-train - <<EOF2
{__parent__: examples/retrieval/train_rerank_minilm, data_dir: $out/data_rerank, save_dir: $out/reranker,
 max_epoch: 1, eval_interval: 1000}
EOF2
fi
for run in inbatch mined; do
  x-eval - <<EOF2
{save_dir: $out/$run, valid_subset: $beir, save_to_file: ${ev}_$run.tsv, save_mode: w}
EOF2
done
for first in mined inbatch; do
  x-eval - <<EOF2
{save_dir: $out/reranker, first_stage: $out/$first, rerank_k: 10, valid_subset: $beir,
 save_to_file: ${ev}_reranked_$first.tsv, save_mode: w}
EOF2
done
python - <<EOF2
import csv
def row(name):
    return next(csv.DictReader(open(f"${ev}_{name}.tsv"), delimiter="\t"))
print("stage\tndcg_at_10\tmrr_at_10\trecall_at_1\trecall_at_10")
for label, name, prefix in (("in-batch negatives", "inbatch", ""), ("+ mined hard negatives", "mined", ""),
                            ("in-batch + reranker (top 10)", "reranked_inbatch", ""),
                            ("mined + reranker (top 10)", "reranked_mined", "")):
    r = row(name)
    print(label, *(f"{float(r[prefix + m]):.4f}" for m in ("ndcg_at_10", "mrr_at_10", "recall_at_1", "recall_at_10")), sep="\t")
EOF2
