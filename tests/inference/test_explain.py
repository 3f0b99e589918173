"""Token attributions (xdpx/inference/explain.py): completeness on every model kind, a planted keyword
ranked first, word pieces merged back into words, x-pred's explain columns, refusals."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from explain_helpers import KEYWORD
from inference_helpers import write_json

from xdpx.cli import run_chain

pytest.importorskip("captum")

TINY_BERT = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
             "max_position_embeddings": 160, "pretrained_model": None, "initializer_range": 0.2}
REVIEW = "这家酒店的服务很好，房间也干净"
PAIR = ["A man is playing a guitar.", "A man plays the guitar."]
NER_TEXT = "江泽民在北京讲话"
# model -> (committed sample, the model's options, loss, inputs). Random weights, seeded: the property holds for
# any weights, and initializer_range 0.2 makes BERT's outputs move enough for the check to mean something.
KINDS: dict[str, tuple[str, dict[str, Any], str, list[list[str]]]] = {
    "cls_cnn": ("reviews_char", {"embedding_dim": 16, "num_filters": 8, "kernel_sizes": [2, 3]}, "cross_entropy",
                [[REVIEW], ["太差了"]]),
    "cls_lstm": ("reviews_char", {"embedding_dim": 16, "hidden_size": 12}, "cross_entropy", [[REVIEW]]),
    "re2": ("stsb_pair", {"embedding_dim": 16, "hidden_size": 16, "blocks": 2, "kernel_sizes": [2, 3]}, "mse", [PAIR]),
    "match_cnn": ("stsb_pair", {"embedding_dim": 16, "hidden_size": 16, "kernel_sizes": [2, 3]}, "mse", [PAIR]),
    "bert_classification": ("reviews_bert", TINY_BERT, "cross_entropy", [[REVIEW + " playing"]]),
    "bert_pair": ("stsb_bert", TINY_BERT, "mse", [PAIR]),
    "lstm_ner": ("peoples_daily_ner", {"embedding_dim": 16, "hidden_size": 12}, "token_cross_entropy", [[NER_TEXT]]),
    "bert_ner": ("peoples_daily_ner_bert", TINY_BERT, "token_cross_entropy", [[NER_TEXT]]),
}
STEPS = 32
# |delta| <= 3% of |output - baseline_output| (+ 1e-6). Smooth models (BERT, LSTM) are within 0.1% at 32
# Gauss-Legendre steps; models of ReLUs and max-pooling have kinks on the path: TextCNN is within 2% at 32
# steps, match_cnn needs 128 (8-18% at 16-32 steps, 1.3% at 128).
RELATIVE = 0.03
STEPS_OF = {"match_cnn": 128}


def load_config_model(tmp_path: Path, name: str, data_dir: Path, options: dict[str, Any], loss: str) -> Any:
    """The model of a training config, as x-pred's config mode builds it (seeded random weights)."""
    from xdpx.command import COMMON_OPTIONS
    from xdpx.config.options import resolve
    from xdpx.inference.loading import load_model
    from xdpx.inference.options import LOAD_OPTIONS

    config = {"__parent__": "${data_dir}/meta", "data_dir": str(data_dir), "save_dir": str(tmp_path / "unused"),
              "model": name, "loss": loss, "batch_size": 8, "learning_rate": 1e-3, "max_epoch": 1,
              "major_metric": "loss", **({"task": "ner"} if loss == "token_cross_entropy" else {}), **options}
    path = write_json(tmp_path / f"{name}.hjson", config)
    args = resolve({"config": str(path), "cuda": False, "seed": 3}, COMMON_OPTIONS + LOAD_OPTIONS, "test", origin="test")
    return load_model(args, say=lambda _message: None)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_attributions_add_up_to_the_output_difference(name: str, prepared: Callable[[str], Path],
                                                      tmp_path: Path) -> None:
    import torch

    from xdpx.inference.explain import encode_texts, explain_texts

    data_name, options, loss, inputs = KINDS[name]
    loaded = load_config_model(tmp_path, name, prepared(data_name), options, loss)
    explained = explain_texts(loaded, inputs, n_steps=STEPS_OF.get(name, STEPS))
    parts = [part for sample in explained for part in sample]
    assert parts, f"{name}: nothing explained"
    for sample_parts, texts in zip(explained, inputs):
        batch = loaded.processor.collate([encode_texts(loaded.processor, texts)])
        with torch.no_grad():
            plain = loaded.model(**batch["net_input"]).float()
        for part in sample_parts:
            difference = part.output - part.baseline_output
            total = sum(score for text in part.tokens for _, score in text)
            assert abs(difference) > 1e-4, f"{name}: the output hardly moves ({difference:.2e}): the check is empty"
            assert abs(total - difference) <= RELATIVE * abs(difference) + 1e-6, (name, total, difference)
            assert abs(part.delta - (total - difference)) < 1e-4  # Captum's delta is that same gap
            if loaded.processor.target_map is not None and part.entity is None:  # the explained logit is the model's
                label = loaded.processor.target_map.labels.index(part.target)
                assert part.output == pytest.approx(float(plain[0, label]), abs=1e-5)
            elif part.entity is None:
                assert part.output == pytest.approx(float(plain.reshape(-1)[0]), abs=1e-5)
            # every text of the sample is covered, in its own words
            assert len(part.tokens) == len(texts)
            for text, words in zip(texts, part.tokens):
                assert "".join(w for w, _ in words).replace(" ", "") == text.replace(" ", "")


def test_bert_baseline_is_the_pad_tokens_under_the_same_mask(prepared: Callable[[str], Path], tmp_path: Path) -> None:
    """The pad baseline is what the model gives for [CLS] [PAD]... [SEP] read as real tokens: checked
    by running the model on those ids, without any hook."""
    import torch

    from xdpx.inference.explain import encode_texts, explain_texts

    data_name, options, loss, inputs = KINDS["bert_classification"]
    loaded = load_config_model(tmp_path, "bert_classification", prepared(data_name), options, loss)
    part = explain_texts(loaded, inputs, n_steps=8)[0][0]
    batch = loaded.processor.collate([encode_texts(loaded.processor, inputs[0])])
    ids = batch["net_input"]["input_ids"].clone()
    ids[0, 1:-1] = loaded.processor.pad_index
    with torch.no_grad():
        baseline = loaded.model(**{**batch["net_input"], "input_ids": ids}).float()
    label = loaded.processor.target_map.labels.index(part.target)
    assert part.baseline_output == pytest.approx(float(baseline[0, label]), abs=1e-5)


def test_word_pieces_are_merged_back_into_the_words_as_written(prepared: Callable[[str], Path],
                                                              tmp_path: Path) -> None:
    from xdpx.inference.explain import explain_texts
    from xdpx.inference.explain_words import piece_words

    data_name, options, loss, _ = KINDS["bert_pair"]
    loaded = load_config_model(tmp_path, "bert_pair", prepared(data_name), options, loss)
    texts = ["Playing GUITARS loudly", "un-played 吉他"]
    pieces = loaded.processor.tokenizer.tokenize(texts[0])
    assert any(p.startswith("##") for p in pieces), pieces  # the vocabulary cuts these words into pieces
    part = explain_texts(loaded, [texts], n_steps=4)[0][0]
    assert [w for w, _ in part.tokens[0]] == ["Playing", "GUITARS", "loudly"]  # case kept, pieces merged
    assert [w for w, _ in part.tokens[1]] == ["un", "-", "played", "吉", "他"]  # Chinese characters stay characters
    # without the raw text (a split of data_dir): the pieces' markers
    assert piece_words(["play", "##ing", "gu", "##itar"]) == [("playing", [0, 1]), ("guitar", [2, 3])]
    assert piece_words(["\u2581play", "ing", "\u2581now"]) == [("playing", [0, 1]), ("now", [2])]


def test_a_planted_keyword_is_ranked_first(keyword_run: dict[str, Path]) -> None:
    from xdpx.inference.explain import explain_texts
    from xdpx.serve.predictor import load_predictor

    loaded = load_predictor(str(keyword_run["run"]), cpu=True).loaded
    texts = [line.split("\t")[0] for line in keyword_run["dev"].read_text(encoding="utf-8").splitlines()]
    planted = [t for t in texts if KEYWORD in t][:12]
    for text, (part,) in zip(planted, explain_texts(loaded, [[t] for t in planted], n_steps=STEPS)):
        assert part.target == "pos", text
        ranked = sorted(part.tokens[0], key=lambda pair: -pair[1])
        assert ranked[0][0] == KEYWORD, (text, ranked[:3])


def read_tsv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def test_x_pred_writes_the_attribution_columns(keyword_run: dict[str, Path], tmp_path: Path) -> None:
    output = tmp_path / "dev.pred.tsv"
    config = write_json(tmp_path / "pred.hjson", {"save_dir": str(keyword_run["run"]), "max_predict": 20, "cuda": False,
                                                  "predict_file_map": {str(keyword_run["dev"]): str(output)},
                                                  "explain": True, "explain_steps": 32})
    assert run_chain(["x-pred", str(config)]) == 0
    rows = read_tsv(output)
    assert len(rows) == 20
    assert list(rows[0])[-3:] == ["prob_pos", "attributions", "attribution_delta"]
    for row in rows:
        pairs = json.loads(row["attributions"])
        # every character of the text, in order (char_zh drops the spaces)
        assert "".join(w for w, _ in pairs) == "".join(row["text"].split())
        if KEYWORD in row["text"] and row["predict"] == "pos":
            assert max(pairs, key=lambda p: p[1])[0] == KEYWORD
        assert abs(float(row["attribution_delta"])) < 0.05


def test_x_pred_refuses_a_text_longer_than_max_len(keyword_run: dict[str, Path], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    source, output = tmp_path / "long.txt", tmp_path / "long.pred.tsv"
    source.write_text(f"短句{KEYWORD}\tpos\n" + "很" * 600 + "\tneg\n", encoding="utf-8")
    config = write_json(tmp_path / "pred.hjson", {"save_dir": str(keyword_run["run"]), "cuda": False, "explain": True,
                                                  "predict_file_map": {str(source): str(output)}})
    assert run_chain(["x-pred", str(config)]) == 2
    message = capsys.readouterr().err
    assert "key 'explain'" in message and "a text of 600 tokens" in message and "max_len" in message, message
    assert not output.exists()  # nothing written


def test_x_pred_refuses_explain_with_binary(keyword_run: dict[str, Path], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    config = write_json(tmp_path / "pred.hjson", {"save_dir": str(keyword_run["run"]), "explain": True, "binary": True,
                                                  "predict_file_map": {str(keyword_run["dev"]): str(tmp_path / "o.npz")}})
    assert run_chain(["x-pred", str(config)]) == 2
    assert "explain: true writes JSON columns to a TSV" in capsys.readouterr().err


def test_bad_inputs_are_refused_with_one_line(keyword_run: dict[str, Path], prepared: Callable[[str], Path],
                                              tmp_path: Path) -> None:
    from xdpx.errors import UserError
    from xdpx.inference.explain import explain_texts
    from xdpx.serve.predictor import load_predictor

    loaded = load_predictor(str(keyword_run["run"]), cpu=True).loaded
    cases = {"  ": "input 0: an empty text", "很" * 600: "input 0: a text of 600 tokens"}
    for text, message in cases.items():
        with pytest.raises(UserError, match=message):
            explain_texts(loaded, [[text]])
    with pytest.raises(UserError, match="input 1: this run's model reads one text; the input has 2"):
        explain_texts(loaded, [["好"], ["好", "坏"]])
    with pytest.raises(UserError, match="explain_baseline: mask needs a mask token"):
        explain_texts(loaded, [["好"]], baseline="mask")
    lm = load_config_model(tmp_path, "bert_lm", prepared("peoples_daily_mlm"), TINY_BERT, "mlm")
    with pytest.raises(UserError, match="explain: model bert_lm is a masked language model"):
        explain_texts(lm, [["好"]])
