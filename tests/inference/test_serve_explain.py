"""x-serve's POST /explain on a real server (127.0.0.1): the prediction with its token attributions, and
one clear 422 for an input that cannot be explained."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from explain_helpers import KEYWORD
from serve_helpers import request, running_server

pytest.importorskip("captum")


def post(server: object, body: object, query: str = "") -> tuple[int, object]:
    status, answer, _headers = request(server.address, "POST", f"/explain{query}",
                                       json.dumps(body, ensure_ascii=False).encode("utf-8"))
    return status, answer


def test_explain_answers_label_probabilities_tokens_and_delta(keyword_run: dict[str, Path]) -> None:
    texts = ["房间很干净喵服务也好", "房间很脏，服务也差"]
    with running_server(keyword_run["run"]) as server:
        status, predicted = post(server, texts)  # the same body as /predict's
        _, plain, _ = request(server.address, "POST", "/predict", json.dumps(texts, ensure_ascii=False).encode("utf-8"))
        assert status == 200, predicted
        planted, other = predicted
        for answer, expected in zip(predicted, plain):  # /predict's answer, attributions added
            assert answer["label"] == expected["label"] and answer["prob"] == pytest.approx(expected["prob"])
            assert answer["probabilities"] == pytest.approx(expected["probabilities"])
            assert answer["target"] == answer["label"]
            total = sum(score for _, score in answer["tokens"])
            assert total == pytest.approx(answer["output"] - answer["baseline_output"], abs=0.03)
            assert answer["delta"] == pytest.approx(total - (answer["output"] - answer["baseline_output"]), abs=1e-4)
            assert "tokens_b" not in answer
        assert planted["label"] == "pos" and other["label"] == "neg"
        assert [w for w, _ in planted["tokens"]] == list(texts[0])  # one character each, in order
        assert max(planted["tokens"], key=lambda pair: pair[1])[0] == KEYWORD

        status, few = post(server, [texts[0]], "?n_steps=4&baseline=zeros")
        assert status == 200 and few[0]["tokens"] != planted["tokens"]  # the options reach the explanation

        refusals = {
            json.dumps([["房间很干净", "服务也好"]]): "input 0: expected 1 text(s), got 2",
            json.dumps(["很" * 600]): "input 0: a text of 600 tokens: the run reads at most max_len 200",
            json.dumps(["好", ["  "]]): "input 1: empty text",
        }
        for body, message in refusals.items():
            status, answer, _ = request(server.address, "POST", "/explain", body.encode("utf-8"))
            assert status == 422 and answer["error"].startswith(message), answer
        status, answer = post(server, texts, "?n_steps=0")
        assert status == 422 and "n_steps '0'" in answer["error"]
        status, answer = post(server, texts, "?baseline=noise")
        assert status == 422 and "baseline 'noise'" in answer["error"]
        status, answer = post(server, {"text": "好"})
        assert status == 400 and "JSON list of inputs" in answer["error"]
