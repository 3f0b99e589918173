#!/bin/sh
# NDCG@10 of the three retrieval stages on the STS-B retrieval test sets as BEIR folders (python
# examples/retrieval/prepare_data.py): stsb_retrieval_beir/test (309 queries, 1,337 documents) and
# stsb_retrieval_beir_all/test (the same queries among 15,160 documents). Real x-train / x-eval runs
# (docs/tasks.md, "Real data: the three stages"):
#   1. all-MiniLM-L6-v2 fine-tuned with in-batch negatives (info_nce), one run per seed;
#   2. the same from MiniLM with one hard negative per pair, mined by the seed-1 run of stage 1 among every
#      sentence of the STS-B train pairs (train_sentences.txt, --k 50), one run per seed;
#   3. a MiniLM cross-encoder trained on pairs mined the same way with --margin 0.05 --negatives 4 (false
#      negatives hurt a cross-encoder most), reranking the top 20 of stage 2's seed-1 run: alone
#      (rerank_weight 1) and fused with the first stage's cosine at the rerank_weight that scores best on the
#      dev BEIR folder (stsb_retrieval_beir/dev; the test folders are not looked at to choose it).
# Stages 1 and 2 share one schedule (3 epochs at lr 5e-5, batch 32: 132 updates): at the example's single
# epoch (44 updates at 2e-5) neither training moves MiniLM far enough for the negatives to matter.
#   sh examples/bert/link_minilm.sh && python examples/retrieval/prepare_data.py
#   sh bench/bench_retrieval_stages.sh         # outputs/bench_stages/*.tsv, the table printed at the end
# SEEDS="1 2 3" (default) the seeds of stages 1 and 2; TRAIN_ONLY=1 stops after the training, EVAL_ONLY=1
# evaluates the runs already in outputs/bench_stages.
set -e
out=outputs/bench_stages
data=examples/data/full/stsb_retrieval
dev=examples/data/full/stsb_retrieval_beir/dev
seeds=${SEEDS:-1 2 3}
first=$(echo $seeds | cut -d' ' -f1)
schedule="max_epoch: 3, learning_rate: 5e-5"
weights="0.1 0.2 0.3 0.5 0.7"
if [ -z "$EVAL_ONLY" ]; then
mkdir -p $out/raw_triplets $out/raw_rerank_triplets $out/raw_rerank
x-prepro examples/retrieval/prepro_retrieval_bert.hjson
for seed in $seeds; do
  x-train - <<EOF2
{__parent__: examples/retrieval/train_retrieval_minilm, save_dir: $out/inbatch_s$seed, seed: $seed, $schedule}
EOF2
done
for split in train dev; do
  x-script mine_negatives $out/inbatch_s$first $data/$split.tsv $out/raw_triplets/$split.tsv \
    --k 50 --corpus $data/train_sentences.txt
  x-script mine_negatives $out/inbatch_s$first $data/$split.tsv $out/raw_rerank_triplets/$split.tsv \
    --k 50 --corpus $data/train_sentences.txt --margin 0.05 --negatives 4
  x-script rerank_pairs $out/raw_rerank_triplets/$split.tsv $out/raw_rerank/$split.tsv
done
x-prepro - <<EOF2
{__parent__: examples/retrieval/prepro_retrieval_bert, data_source: $out/raw_triplets,
 data_files: {train.tsv: train, dev.tsv: dev}, data_dir: $out/data_triplets, loader: triplet, label_column: 3}
EOF2
for seed in $seeds; do
  x-train - <<EOF2
{__parent__: examples/retrieval/train_retrieval_minilm, data_dir: $out/data_triplets, save_dir: $out/mined_s$seed,
 seed: $seed, $schedule}
EOF2
done
x-prepro - <<EOF2
{__parent__: examples/retrieval/prepro_rerank_bert, data_source: $out/raw_rerank, data_dir: $out/data_rerank, max_len: 64}
EOF2
x-train - <<EOF2
{__parent__: examples/retrieval/train_rerank_minilm, data_dir: $out/data_rerank, save_dir: $out/reranker,
 eval_interval: 1000, $schedule}
EOF2
fi
[ -n "$TRAIN_ONLY" ] && exit 0
evaluate() {  # evaluate NAME CONFIG_BODY: one x-eval row into $out/eval_NAME.tsv
  x-eval - <<EOF2
{$2, save_to_file: $out/eval_$1.tsv, save_mode: w}
EOF2
}
for set in stsb_retrieval_beir stsb_retrieval_beir_all; do
  for seed in $seeds; do
    for stage in inbatch mined; do
      evaluate ${set}_${stage}_s$seed "save_dir: $out/${stage}_s$seed, valid_subset: examples/data/full/$set/test"
    done
  done
done
rerank="save_dir: $out/reranker, first_stage: $out/mined_s$first, rerank_k: 20"
for w in $weights; do
  evaluate dev_reranked_w$w "$rerank, rerank_weight: $w, valid_subset: $dev"
done
best=$(python - "$out" $weights <<'EOF2'
import csv, sys
out, weights = sys.argv[1], sys.argv[2:]
score = {w: float(next(csv.DictReader(open(f"{out}/eval_dev_reranked_w{w}.tsv"), delimiter="\t"))["ndcg_at_10"])
         for w in weights}
print(max(weights, key=lambda w: (score[w], -float(w))))  # the best on dev; equal: the smaller weight
EOF2
)
echo "rerank_weight chosen on $dev: $best"
for set in stsb_retrieval_beir stsb_retrieval_beir_all; do
  evaluate ${set}_reranked_alone "$rerank, valid_subset: examples/data/full/$set/test"
  evaluate ${set}_reranked_fused "$rerank, rerank_weight: $best, valid_subset: examples/data/full/$set/test"
done
python - "$out" "$best" $seeds <<'EOF2'
import csv, sys
out, best, seeds = sys.argv[1], sys.argv[2], sys.argv[3:]
metrics = ("ndcg_at_10", "mrr_at_10", "recall_at_1", "recall_at_10")
def row(name):
    return next(csv.DictReader(open(f"{out}/eval_{name}.tsv"), delimiter="\t"))
for corpus in ("stsb_retrieval_beir", "stsb_retrieval_beir_all"):
    print(f"\n{corpus}/test\tseed\t" + "\t".join(metrics))
    for label, stage in (("in-batch negatives", "inbatch"), ("+ mined hard negatives", "mined")):
        rows = [row(f"{corpus}_{stage}_s{seed}") for seed in seeds]
        for seed, r in zip(seeds, rows):
            print(label, seed, *(f"{float(r[m]):.4f}" for m in metrics), sep="\t")
        print(label, "mean", *(f"{sum(float(r[m]) for r in rows) / len(rows):.4f}" for m in metrics), sep="\t")
    for label, name in (("+ reranker alone (top 20)", "alone"), (f"+ reranker fused, weight {best} (top 20)", "fused")):
        r = row(f"{corpus}_reranked_{name}")
        print(label, seeds[0], *(f"{float(r[m]):.4f}" for m in metrics), sep="\t")
    print("(first stage of the reranked rows:", row(f"{corpus}_reranked_alone")["first_stage.ndcg_at_10"] + ")")
EOF2
