"""Fixtures of the transformers-family tests: tiny random models of each architecture with their tokenizers
(tests/models_hf/hf_builders.py), and x-prepro output of the committed polarity sample per tokenizer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from xdpx.cli import run_chain

pytest.importorskip("transformers")

from hf_builders import ARCHITECTURES, SAMPLES, build_model_folder, train_tokenizer  # noqa: E402


@pytest.fixture
def one_thread() -> Iterator[None]:
    """One CPU thread: the same arithmetic in every run of a test, whatever an earlier test set."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def hf_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """architecture -> model folder (config.json, model.safetensors, tokenizer.json, tokenizer_config.json);
    the architectures of one tokenizer kind share that tokenizer."""
    root = tmp_path_factory.mktemp("hf_models")
    tokenizers = {kind: train_tokenizer(kind) for kind in sorted({kind for kind, _ in ARCHITECTURES.values()})}
    return {name: build_model_folder(name, root / name, tokenizers[kind]) for name, (kind, _) in ARCHITECTURES.items()}


def prepro(root: Path, name: str, **config: object) -> Path:
    path = root / f"{name}.hjson"
    path.write_text(json.dumps({"data_dir": str(root / name), "workers": 1, "tokenizer": "auto", **config}))
    assert run_chain(["x-prepro", str(path)]) == 0
    return root / name


@pytest.fixture(scope="session")
def hf_polarity(hf_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """architecture -> hf_single data of the polarity sample (one x-prepro per tokenizer kind)."""
    root = tmp_path_factory.mktemp("hf_data")
    by_kind: dict[str, Path] = {}
    for name, (kind, _) in ARCHITECTURES.items():
        if kind not in by_kind:
            by_kind[kind] = prepro(root, kind, data_source=str(SAMPLES / "polarity"), processor="hf_single",
                                   loader="single", text_column=1, label_column=0, tokenizer_dir=str(hf_models[name]),
                                   max_len=40)
    return {name: by_kind[kind] for name, (kind, _) in ARCHITECTURES.items()}
