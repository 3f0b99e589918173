"""Token attributions through the transformers family (xdpx/inference/explain.py): the word vectors that
transformers' own get_input_embeddings() looks up are explained, the scores add up to the output
difference, and byte-level BPE (RoBERTa's Ġ) and SentencePiece (XLM-R's ▁) pieces come back as the words
of the text as written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("captum")

TEXT = "The filmmakers skillfully evoke a MENACE, unforgettable."
STEPS = 32


@pytest.mark.parametrize("architecture", ["roberta", "xlm-roberta"])
def test_transformers_models_are_explained_in_words(architecture: str, hf_models: dict[str, Path],
                                                    hf_polarity: dict[str, Path], tmp_path: Path) -> None:
    import torch

    from xdpx.command import COMMON_OPTIONS
    from xdpx.config.options import resolve
    from xdpx.inference.explain import encode_texts, explain_texts
    from xdpx.inference.loading import load_model
    from xdpx.inference.options import LOAD_OPTIONS

    config = {"__parent__": "${data_dir}/meta", "data_dir": str(hf_polarity[architecture]),
              "save_dir": str(tmp_path / "unused"), "model": "hf_classification",
              "pretrained_model": str(hf_models[architecture]), "loss": "cross_entropy", "batch_size": 8,
              "learning_rate": 1e-3, "max_epoch": 1, "major_metric": "accuracy"}
    path = tmp_path / "train.hjson"
    path.write_text(json.dumps(config))
    args = resolve({"config": str(path), "cuda": False}, COMMON_OPTIONS + LOAD_OPTIONS, "test", origin="test")
    loaded = load_model(args, say=lambda _message: None)
    pieces = loaded.processor.tokenizer.tokenize(TEXT)
    assert len(pieces) > len(TEXT.split()) + 2, pieces  # words are cut into pieces

    (part,), = explain_texts(loaded, [[TEXT]], n_steps=STEPS)
    words = [w for w, _ in part.tokens[0]]
    assert "".join(words) == TEXT.replace(" ", "")
    # pieces merged, case kept (SentencePiece's words are the whitespace-separated ones: punctuation stays attached)
    assert "filmmakers" in words and "MENACE" in {w.rstrip(",") for w in words}
    assert {"unforgettable", "unforgettable."} & set(words)
    difference = part.output - part.baseline_output
    total = sum(score for _, score in part.tokens[0])
    assert abs(difference) > 1e-5 and abs(total - difference) <= 0.03 * abs(difference) + 1e-7, (total, difference)
    batch = loaded.processor.collate([encode_texts(loaded.processor, [TEXT])])
    with torch.no_grad():
        plain = loaded.model(**batch["net_input"]).float()
    label = loaded.processor.target_map.labels.index(part.target)
    assert part.output == pytest.approx(float(plain[0, label]), abs=1e-5)
