"""Helpers of the retrieval tests (fixtures are in conftest.py): x-prepro of the committed STS-B retrieval
sample (pairs with score >= 4; words as tokens, vocabulary with [CLS]/[SEP] built from train), and a tiny
random BERT bi-encoder run."""

from __future__ import annotations

import json
from pathlib import Path

from tests.train.train_helpers import run_killable, write_config  # noqa: F401 (tests import run_killable here)
from xdpx.cli import run_chain

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples/retrieval/data"
# tiny and fast, still real: a 2-layer BERT of width 32 from random weights, 160 pairs (60 in dev)
RUN = {"model": "bert_bi_encoder", "pretrained_model": None, "hidden_size": 32, "num_hidden_layers": 2,
       "num_attention_heads": 2, "intermediate_size": 48, "loss": "info_nce", "batch_size": 16,
       "learning_rate": 1e-3, "max_epoch": 2, "eval_interval": 6, "major_metric": "mrr", "log_interval": 4,
       "hidden_dropout_prob": 0.1, "resume": True, "save_best_only": True, "save_last_only": True}


def prepro(root: Path, **overrides: object) -> Path:
    config = {"__parent__": str(REPO / "examples/retrieval/prepro_retrieval_bert"), "data_source": str(SAMPLE),
              "data_dir": str(root / "data"), "tokenizer": "space", "vocab_file": None, "threshold": 0,
              "workers": 1, **overrides}
    (root / "prepro.json").write_text(json.dumps(config))
    assert run_chain(["x-prepro", str(root / "prepro.json")]) == 0
    return root / "data"


def train_config(root: Path, data_dir: Path, **overrides: object) -> Path:
    """root/train.json: RUN with ``overrides`` (``key=...`` drops a RUN key), saving to root/run."""
    return write_config(root / "train.json", data_dir, root / "run", base=RUN, **overrides)


def dev_beir(folder: Path, qrels_extra: str = "") -> list[list[str]]:
    """The committed dev pairs whose positive is unique as a BEIR folder: the positives are the corpus
    (d<i>), the queries (q<i>) are judged 1 on their own positive; ``qrels_extra``: more qrels lines."""
    from collections import Counter

    rows = [line.split("\t") for line in (SAMPLE / "dev.tsv").read_text().splitlines()]
    counts = Counter(r[1] for r in rows)
    rows = [r for r in rows if counts[r[1]] == 1]
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "title": "", "text": r[1]}) + "\n"
                                                 for i, r in enumerate(rows)))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": r[0]}) + "\n"
                                                  for i, r in enumerate(rows)))
    (folder / "qrels/test.tsv").write_text("query-id\tcorpus-id\tscore\n"
                                           + "".join(f"q{i}\td{i}\t1\n" for i in range(len(rows))) + qrels_extra)
    return rows
