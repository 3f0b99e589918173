"""The processor is the input's shape; special_tokens frames it for a transformer and teacher_logits adds a
teacher's logits, on any shape: the same stored samples as the names of earlier releases (bert_single =
single + special_tokens: bert, hf_single = single + model, single_with_logits = single + teacher_logits),
and combinations that had no name (a transformers tokenizer's samples with teacher logits)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from xdpx.cli import run_chain
from xdpx.data.dataset import open_split

REPO = Path(__file__).resolve().parents[2]
POLARITY = REPO / "examples/data/sample/polarity"
VOCAB = REPO / "tests/legacy/release_ae43b9c/vocab.txt"  # a small BERT vocabulary (characters, letters)


def prepro(root: Path, name: str, **config: object) -> Path:
    path = root / f"{name}.json"
    path.write_text(json.dumps({"data_dir": str(root / name), "workers": 1, "data_source": str(POLARITY),
                                "loader": "single", "text_column": 1, "label_column": 0, "max_len": 24, **config}))
    assert run_chain(["x-prepro", str(path)]) == 0
    return root / name


def samples(data_dir: Path, split: str = "dev", count: int = 20) -> list[dict]:
    data = open_split(str(data_dir), split)
    return [data[i] for i in range(min(count, len(data)))]


def assert_same_samples(a: Path, b: Path) -> None:
    for x, y in zip(samples(a), samples(b), strict=True):
        assert set(x) == set(y)
        for field in x:
            assert np.array_equal(np.asarray(x[field]), np.asarray(y[field])), field


def test_single_framed_by_bert_is_bert_single(tmp_path):
    framed = prepro(tmp_path, "framed", processor="single", special_tokens="bert", tokenizer="bert",
                    vocab_file=str(VOCAB))
    named = prepro(tmp_path, "named", processor="bert_single", tokenizer="bert", vocab_file=str(VOCAB))
    assert_same_samples(framed, named)
    assert {"input_ids", "token_type_ids"} <= set(samples(framed)[0])


def test_single_framed_by_the_models_template_is_hf_single(tmp_path):
    pytest.importorskip("transformers")
    sys.path.insert(0, str(REPO / "tests/models_hf"))
    from hf_builders import build_model_folder

    folder = build_model_folder("roberta", tmp_path / "roberta")
    common = {"tokenizer": "auto", "tokenizer_dir": str(folder)}
    framed = prepro(tmp_path, "framed", processor="single", special_tokens="model", **common)
    named = prepro(tmp_path, "named", processor="hf_single", **common)
    assert_same_samples(framed, named)
    first = samples(framed)[0]["input_ids"]
    vocab = json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"]
    assert first[0] == vocab["<s>"] and first[-1] == vocab["</s>"]


def with_logits_file(root: Path) -> Path:
    """The polarity sample with two teacher logits after the label, as x-pred distill: true writes them."""
    folder = root / "with_logits"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for split in ("train", "dev"):
        lines = (POLARITY / f"{split}.txt").read_text(encoding="utf-8").splitlines()
        rows = [f"{line}\t{rng.normal():.4f}\t{rng.normal():.4f}" for line in lines]
        (folder / f"{split}.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder


def test_teacher_logits_on_a_framed_single_is_bert_single_with_logits(tmp_path):
    """single + special_tokens: bert + teacher_logits stores what bert_single_with_logits stored, and its
    batches bring the teacher's logits and the raw texts."""
    source = with_logits_file(tmp_path)
    data = prepro(tmp_path, "framed_logits", processor="single", special_tokens="bert", tokenizer="bert",
                  vocab_file=str(VOCAB), teacher_logits=True, keep_texts=True, data_source=str(source))
    named = prepro(tmp_path, "named_logits", processor="bert_single_with_logits", loader="single_with_logits",
                   tokenizer="bert", vocab_file=str(VOCAB), keep_texts=True, data_source=str(source))
    assert_same_samples(data, named)
    batch = collated(data, 4)
    first_line = (source / "train.txt").read_text(encoding="utf-8").splitlines()[0].split("\t")
    assert batch["teacher_logits"].shape == (4, 2)
    assert batch["teacher_logits"][0].tolist() == pytest.approx([float(first_line[2]), float(first_line[3])])
    assert batch["texts"][0] == [first_line[1]]


def collated(data: Path, count: int) -> dict:
    from xdpx.config.options import Args
    from xdpx.config.writers import read_args
    from xdpx.data.composition import build_processor

    args = Args(read_args(str(data / "args.py")), {}, set(), {})
    return build_processor(args, data_dir=str(data)).collate(samples(data, "train", count))


def test_teacher_logits_on_a_transformers_tokenizers_samples_which_had_no_name_before(tmp_path):
    pytest.importorskip("transformers")
    sys.path.insert(0, str(REPO / "tests/models_hf"))
    from hf_builders import build_model_folder

    folder = build_model_folder("roberta", tmp_path / "roberta")
    data = prepro(tmp_path, "hf_logits", processor="hf_single", tokenizer="auto", tokenizer_dir=str(folder),
                  teacher_logits=True, data_source=str(with_logits_file(tmp_path)))
    batch = collated(data, 3)
    assert batch["teacher_logits"].shape == (3, 2) and "input_ids" in batch["net_input"]
    assert samples(data, "train", 1)[0]["logits"].dtype == np.float32


def test_special_tokens_on_a_processor_without_a_framed_form_is_a_config_error(tmp_path, capsys):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"data_dir": str(tmp_path / "d"), "data_source": str(POLARITY), "loader": "single",
                                "text_column": 1, "label_column": 0, "max_len": 24, "processor": "bert_single",
                                "special_tokens": "model", "tokenizer": "bert", "vocab_file": str(VOCAB)}))
    assert run_chain(["x-prepro", str(path), "--dry"]) == 2
    err = capsys.readouterr().err
    assert "special_tokens: model: processor bert_single frames its samples itself" in err
    assert not (tmp_path / "d").exists()
