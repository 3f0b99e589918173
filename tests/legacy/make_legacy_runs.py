"""Writes tests/legacy/release_ae43b9c/: tiny run directories of every model kind, made by the release
before models became an encoder and a head (commit ae43b9c, 2026-11-26). They are committed as they were
written, so tests/legacy/test_legacy_runs.py checks that runs of that release still load (x-eval equals
their valid.log.tsv, x-pred, x-serve's predictor, resume).

Run it with that release's code, from the repository root:

    git worktree add /tmp/release ae43b9c
    PYTHONPATH=/tmp/release python tests/legacy/make_legacy_runs.py

Every run pauses at update 6 of 8 (train_steps), so that resuming it has updates left to make. Every path in
the configs is relative to the output folder (the script runs there), so args.py holds
``data/...`` and ``runs/...`` and the folder can be copied anywhere. Sizes are tiny (hidden 8-16, a vocabulary
of the sample's 120 most frequent characters for the BERT runs) to keep the committed files small.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent / "release_ae43b9c"
SAMPLES = REPO / "examples/data/sample"
NER_SAMPLE = REPO / "examples/ner/data"
RETRIEVAL_SAMPLE = REPO / "examples/retrieval/data"

COMMON = {"batch_size": 16, "learning_rate": 1e-3, "max_update": 8, "train_steps": 6, "eval_interval": 6, "log_interval": 3,
          "save_best_only": True, "save_last_only": True, "viz": False, "valid_subset": "dev"}
TINY_BERT = {"pretrained_model": None, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
             "intermediate_size": 16, "max_position_embeddings": 64}
SMALL_WORDS = {"embedding_dim": 8, "dropout": 0.1}


def write(path: str, config: dict) -> str:
    Path(path).write_text(json.dumps(config, ensure_ascii=False, indent=1), encoding="utf-8")
    return path


def run(*argv: str) -> None:
    from xdpx.cli import run_chain

    code = run_chain(list(argv))
    if code != 0:
        sys.exit(f"{argv} exited {code}")


def char_vocab() -> str:
    """vocab.txt for the tiny BERT runs: the special tokens and the 120 most frequent characters of the
    review and People's Daily samples."""
    counts: collections.Counter[str] = collections.Counter()
    for path in [*(SAMPLES / "reviews").glob("*.txt"), *(SAMPLES / "peoples_daily").glob("*.txt")]:
        counts.update(c for c in path.read_text(encoding="utf-8") if not c.isspace())
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]  # English of the STS-B pairs, letter by letter
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [c for c, _ in counts.most_common(120)]
    words += [c for c in letters if c not in words] + [f"##{c}" for c in letters]
    Path("vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    return "vocab.txt"


def prepro_all() -> None:
    vocab = char_vocab()
    data = {
        "reviews_char": {"data_source": str(SAMPLES / "reviews"), "processor": "single", "loader": "single",
                         "tokenizer": "char_zh", "max_len": 48, "threshold": 3},
        "reviews_bert": {"data_source": str(SAMPLES / "reviews"), "processor": "bert_single", "loader": "single",
                         "tokenizer": "bert",
                         "vocab_file": vocab, "max_len": 48},
        "stsb_bert": {"data_source": str(SAMPLES / "stsb"), "data_files": "*.tsv", "processor": "bert_pair",
                              "loader": "pair", "text1_column": 5, "text2_column": 6, "label_column": 4,
                              "target_type": "regression", "extra_columns": True, "tokenizer": "bert", "vocab_file": vocab,
                              "max_len": 48},
        "daily_lm": {"data_source": str(SAMPLES / "peoples_daily"), "processor": "bert_lm", "loader": "corpus",
                     "tokenizer": "bert", "vocab_file": vocab, "max_len": 32},
        "daily_pretrain": {"data_source": str(SAMPLES / "peoples_daily"), "processor": "bert_pretrain",
                           "loader": "corpus", "tokenizer": "bert", "vocab_file": vocab, "max_len": 32},
        "ner_char": {"__parent__": str(REPO / "examples/ner/prepro_char"), "data_source": str(NER_SAMPLE),
                     "data_files": "*.conll", "max_len": 32, "threshold": 3},
        "ner_bert": {"__parent__": str(REPO / "examples/ner/prepro_char"), "data_source": str(NER_SAMPLE),
                     "data_files": "*.conll", "processor": "bert_ner", "tokenizer": "bert", "vocab_file": vocab,
                     "max_len": 32},
        "retrieval_words": {"__parent__": str(REPO / "examples/retrieval/prepro_retrieval_bert"),
                            "data_source": str(RETRIEVAL_SAMPLE), "processor": "bi_encoder", "tokenizer": "space",
                            "vocab_file": None, "threshold": 2},
        "retrieval_bert": {"__parent__": str(REPO / "examples/retrieval/prepro_retrieval_bert"),
                           "data_source": str(RETRIEVAL_SAMPLE), "tokenizer": "space", "vocab_file": None,
                           "threshold": 2},
        "multilabel_char": {"data_source": str(SAMPLES / "reviews"), "processor": "single", "loader": "single",
                            "tokenizer": "char_zh", "max_len": 48, "threshold": 3, "target_type": "multilabel"},
    }
    for name, config in data.items():
        run("x-prepro", write(f"prepro_{name}.json", {"data_dir": f"data/{name}", "workers": 1, **config}))


RUNS = {
    "cls_cnn": ("reviews_char", {"model": "cls_cnn", **SMALL_WORDS, "num_filters": 8, "loss": "cross_entropy",
                                 "major_metric": "accuracy"}),
    "cls_lstm": ("reviews_char", {"model": "cls_lstm", **SMALL_WORDS, "hidden_size": 8, "pooling": "attention",
                                  "loss": "cross_entropy", "major_metric": "accuracy"}),
    "bert_classification": ("reviews_bert", {"model": "bert_classification", **TINY_BERT, "loss": "cross_entropy",
                                             "major_metric": "accuracy"}),
    "bert_classification_lora": ("reviews_bert", {"model": "bert_classification", **TINY_BERT, "lora": {"r": 2},
                                                  "loss": "cross_entropy", "major_metric": "accuracy"}),
    "bert_pair": ("stsb_bert", {"model": "bert_pair", **TINY_BERT, "loss": "mse", "major_metric": "pearson"}),
    "bert_siamese": ("stsb_bert", {"model": "bert_siamese", **TINY_BERT, "loss": "mse",
                                           "major_metric": "pearson"}),
    "bert_lm": ("daily_lm", {"model": "bert_lm", **TINY_BERT, "loss": "mlm", "major_metric": "mlm_accuracy"}),
    "bert_pretrain": ("daily_pretrain", {"model": "bert_pretrain", **TINY_BERT, "loss": "mlm_sop",
                                         "major_metric": "mlm_accuracy"}),
    "bert_ner": ("ner_bert", {"task": "ner", "model": "bert_ner", **TINY_BERT, "crf": True,
                              "loss": "token_cross_entropy", "major_metric": "entity_f1"}),
    "lstm_ner": ("ner_char", {"task": "ner", "model": "lstm_ner", **SMALL_WORDS, "hidden_size": 8, "crf": True,
                              "loss": "token_cross_entropy", "major_metric": "entity_f1"}),
    "bert_bi_encoder": ("retrieval_bert", {"model": "bert_bi_encoder", **TINY_BERT, "loss": "info_nce",
                                           "major_metric": "mrr"}),
    "bi_encoder": ("retrieval_words", {"model": "bi_encoder", **SMALL_WORDS, "hidden_size": 8, "embedding_size": 8,
                                       "loss": "info_nce", "major_metric": "mrr"}),
    "cls_cnn_multilabel": ("multilabel_char", {"model": "cls_cnn", **SMALL_WORDS, "num_filters": 8,
                                               "loss": "multilabel_bce", "major_metric": "micro_f1"}),
}


def hf_runs() -> None:
    """hf_classification and hf_pair on a tiny random RoBERTa (tests/models_hf/hf_builders.py)."""
    sys.path.insert(0, str(REPO / "tests/models_hf"))
    from hf_builders import build_model_folder, train_tokenizer

    folder = build_model_folder("roberta", Path("models/roberta"), train_tokenizer("bpe_roberta", vocab_size=300))
    config = json.loads((folder / "config.json").read_text())
    config.update(hidden_size=8, intermediate_size=16, num_attention_heads=2, num_hidden_layers=1)
    (folder / "config.json").write_text(json.dumps(config))
    import torch
    from transformers import AutoConfig, AutoModel

    torch.manual_seed(0)
    AutoModel.from_config(AutoConfig.from_pretrained(folder)).save_pretrained(folder)
    run("x-prepro", write("prepro_polarity_hf.json", {
        "data_dir": "data/polarity_hf", "workers": 1, "data_source": str(SAMPLES / "polarity"), "processor": "hf_single",
        "loader": "single", "text_column": 1, "label_column": 0, "tokenizer": "auto", "tokenizer_dir": str(folder),
        "max_len": 40}))
    run("x-prepro", write("prepro_stsb_hf.json", {
        "data_dir": "data/stsb_hf", "workers": 1, "data_source": str(SAMPLES / "stsb"), "data_files": "*.tsv",
        "processor": "hf_pair", "loader": "pair", "text1_column": 5, "text2_column": 6, "label_column": 4,
        "target_type": "regression", "extra_columns": True, "tokenizer": "auto", "tokenizer_dir": str(folder),
        "max_len": 48}))
    for name, data, extra in (("hf_classification", "polarity_hf", {"loss": "cross_entropy", "major_metric": "accuracy"}),
                              ("hf_pair", "stsb_hf", {"loss": "mse", "major_metric": "pearson"})):
        train(name, data, {"model": name, "pretrained_model": str(folder), **extra})


def train(name: str, data: str, config: dict) -> None:
    run("x-train", write(f"train_{name}.json", {"__parent__": "${data_dir}/meta", "data_dir": f"data/{data}",
                                                 "save_dir": f"runs/{name}", **COMMON, **config}))


def main() -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    os.chdir(OUT)
    prepro_all()
    for name, (data, config) in RUNS.items():
        train(name, data, config)
    hf_runs()
    # the runs need no code snapshots and plots (the tiny RoBERTa folder stays: data_dir/meta.hjson names it)
    for leftover in [*Path("runs").rglob("snapshot.zip"), *Path("runs").rglob("plots")]:
        shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()


if __name__ == "__main__":
    main()
