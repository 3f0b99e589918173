"""The planted-keyword run of the explain tests (tests/inference/test_explain.py, test_serve_explain.py)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from inference_helpers import REPO, SAMPLE, train_run, write_json

from xdpx.cli import run_chain

KEYWORD = "喵"  # not in the review sample: a planted keyword decides the label


@pytest.fixture(scope="session")
def keyword_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """cls_cnn trained on the review sentences with a planted keyword: label pos exactly when the text holds it."""
    root = tmp_path_factory.mktemp("keyword")
    rng = random.Random(5)
    source = root / "source"
    source.mkdir()
    for split in ("train", "dev", "test"):
        lines = []
        for line in (SAMPLE / f"reviews/{split}.txt").read_text(encoding="utf-8").splitlines():
            text = line.split("\t")[0][:40]
            planted = rng.random() < 0.5
            if planted:
                at = rng.randrange(len(text) + 1)
                text = text[:at] + KEYWORD + text[at:]
            lines.append(f"{text}\t{'pos' if planted else 'neg'}")
        (source / f"{split}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = write_json(root / "prepro.hjson", {"__parent__": str(REPO / "examples/prepro/reviews_char"),
                                                "data_source": str(source), "data_dir": str(root / "data"),
                                                "workers": 1})
    assert run_chain(["x-prepro", str(config)]) == 0
    run = train_run(root, root / "data", max_epoch=3, eval_interval=..., learning_rate=2e-2, kernel_sizes=[1, 2])
    return {"run": run, "dev": source / "dev.txt"}
