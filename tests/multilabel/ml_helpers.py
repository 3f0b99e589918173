"""Helpers of the multi-label tests (fixtures are in conftest.py): x-prepro of the committed People's Daily
multi-label sample, the config of a tiny cls_cnn run with multilabel_bce."""

from __future__ import annotations

import json
from pathlib import Path

from tests.train.train_helpers import run_killable, write_config  # noqa: F401 (tests import run_killable here)
from xdpx.cli import run_chain

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples/multilabel/data"
# tiny and fast, still real: cls_cnn on 240 sentences (60 in dev), 5 labels
RUN = {"model": "cls_cnn", "loss": "multilabel_bce", "embedding_dim": 16, "num_filters": 8, "kernel_sizes": [1, 2],
       "dropout": 0.1, "batch_size": 16, "learning_rate": 5e-3, "max_epoch": 2, "eval_interval": 10,
       "major_metric": "micro_f1", "log_interval": 4, "decision_threshold": 0.4, "label_thresholds": {"person": 0.3},
       "resume": True, "save_best_only": True, "save_last_only": True}


def prepro(root: Path, **overrides: object) -> Path:
    config = {"__parent__": str(REPO / "examples/multilabel/prepro_char"), "data_source": str(SAMPLE),
              "data_dir": str(root / "data"), "workers": 1, **overrides}
    (root / "prepro.json").write_text(json.dumps(config, ensure_ascii=False))
    assert run_chain(["x-prepro", str(root / "prepro.json")]) == 0
    return root / "data"


def train_config(root: Path, data_dir: Path, **overrides: object) -> Path:
    """root/train.json: RUN with ``overrides`` (``key=...`` drops a RUN key), saving to root/run."""
    return write_config(root / "train.json", data_dir, root / "run", base=RUN, **overrides)
