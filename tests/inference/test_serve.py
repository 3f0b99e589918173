"""x-serve: HTTP under concurrent load with malformed requests (every answer checked, the server keeps
serving), batching across requests, and the interactive mode."""

from __future__ import annotations

import http.client
import json
import random
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from inference_helpers import SAMPLE

TEXTS = [line.split("\t")[0] for line in (SAMPLE / "reviews/test.txt").read_text(encoding="utf-8").splitlines()]
SERVE = [sys.executable, "-c", "from xdpx.cli import x_serve; x_serve()"]


@pytest.fixture
def server(cnn_run: Path) -> Iterator[tuple[str, int]]:
    """``x-serve RUN --port 0`` in its own process; yields (host, port) read from its first line."""
    process = subprocess.Popen([*SERVE, str(cnn_run), "--port", "0", "--cpu", "--batch_size", "16"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        found = re.search(r"http://([\d.]+):(\d+)", line)
        assert found, f"x-serve did not start: {line!r} {process.stderr.read() if process.poll() is not None else ''}"
        yield found.group(1), int(found.group(2))
        assert process.poll() is None, "the server died"
    finally:
        process.terminate()
        process.wait(timeout=30)


def request(address: tuple[str, int], method: str, path: str, body: bytes | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, Any]:
    connection = http.client.HTTPConnection(*address, timeout=60)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, json.loads(response.read().decode("utf-8"))
    finally:
        connection.close()


def expected_predictions(run: Path) -> dict[str, dict[str, Any]]:
    """Each test text predicted alone, in this process (the server batches it with others)."""
    from xdpx.inference.serve import load_predictor

    predictor = load_predictor(str(run), cpu=True)
    return {text: predictor.predict_samples([predictor.encode(text)])[0] for text in TEXTS}


MALFORMED = [
    (b"not json", "the body is not JSON", 400),
    (b'{"text": "a dict"}', "send a non-empty JSON list", 400),
    (b"[]", "send a non-empty JSON list", 400),
    (json.dumps(["ok", ""]).encode(), "input 1: empty text", 400),
    (json.dumps(["ok", 3]).encode(), "input 1: an input is a string", 400),
    (json.dumps([["one", "two"]]).encode(), "input 0: expected 1 text(s), got 2", 400),
    (b"\xff\xfe", "the body is not JSON", 400),
]


def test_http_survives_malformed_requests_under_concurrent_load(server: tuple[str, int], cnn_run: Path) -> None:
    expected = expected_predictions(cnn_run)
    failures: list[str] = []
    counts = {"ok": 0, "bad": 0}
    lock = threading.Lock()

    def client(worker: int) -> None:
        rng = random.Random(worker)
        for j in range(25):
            kind = (worker + j) % 4
            try:
                if kind == 0:  # a malformed request
                    body, message, status = MALFORMED[rng.randrange(len(MALFORMED))]
                    got, answer = request(server, "POST", "/predict", body)
                    ok = got == status and message in answer.get("error", "")
                    key = "bad"
                elif kind == 1 and j % 8 == 1:
                    got, answer = request(server, "GET", "/health")
                    ok, key = got == 200 and answer["status"] == "ok" and answer["labels"] == ["neg", "pos"], "ok"
                else:  # 1 to 6 real texts
                    texts = rng.sample(TEXTS, rng.randint(1, 6))
                    got, answer = request(server, "POST", "/predict", json.dumps(texts).encode("utf-8"),
                                          {"Content-Type": "application/json"})
                    ok = got == 200 and len(answer) == len(texts) and all(
                        a["label"] == expected[t]["label"] and abs(a["prob"] - expected[t]["prob"]) < 1e-5
                        and abs(sum(a["probabilities"].values()) - 1) < 1e-6 for a, t in zip(answer, texts))
                    key = "ok"
            except Exception as e:  # a refused or broken connection is a failure too
                ok, got, answer, key = False, None, repr(e), "ok"
            with lock:
                counts[key] += 1
                if not ok:
                    failures.append(f"worker {worker} request {j}: {got} {answer}")

    threads = [threading.Thread(target=client, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "requests hung"
    assert not failures, "\n".join(failures[:10])
    assert counts["bad"] >= 40 and counts["ok"] + counts["bad"] == 200
    # still serving, and the other answers of a bad request
    status, answer = request(server, "POST", "/predict", json.dumps(TEXTS[:3]).encode())
    assert status == 200 and [a["label"] for a in answer] == [expected[t]["label"] for t in TEXTS[:3]]
    assert request(server, "GET", "/nope")[0] == 404
    assert request(server, "POST", "/other", b"[]")[0] == 404
    status, answer = request(server, "POST", "/predict", b'["x"]', {"Content-Length": "abc"})
    assert status == 400
    assert request(server, "GET", "/health")[0] == 200


def test_requests_are_batched_together(cnn_run: Path) -> None:
    """Concurrent requests share forward passes: fewer passes than requests, each answer its own."""
    from xdpx.inference.serve import Batcher, load_predictor

    predictor = load_predictor(str(cnn_run), cpu=True)
    passes: list[int] = []
    original = predictor.predict_samples

    def counting(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        passes.append(len(samples))
        return original(samples)

    predictor.predict_samples = counting  # type: ignore[method-assign]
    batcher = Batcher(predictor, batch_size=64, max_wait=0.2)
    answers: dict[int, Any] = {}

    def ask(i: int) -> None:
        answers[i] = batcher.predict([predictor.encode(TEXTS[i])])

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sum(passes) == 12 and len(passes) < 12
    for i in range(12):
        alone = original([predictor.encode(TEXTS[i])])[0]
        assert answers[i][0]["label"] == alone["label"] and abs(answers[i][0]["prob"] - alone["prob"]) < 1e-5


def test_interactive_reads_lines_until_quit(cnn_run: Path) -> None:
    lines = [TEXTS[0], "\tpos", f"{TEXTS[1]}\tpos", "quit", TEXTS[2]]
    result = subprocess.run([*SERVE, str(cnn_run), "--cpu"], input="\n".join(lines) + "\n", capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    out = result.stdout.splitlines()
    assert len(out) == 3, out  # two predictions and one error; nothing after quit
    assert re.match(r"^(neg|pos)\t0\.\d{4}\t\(neg: 0\.\d{4}, pos: 0\.\d{4}\)$", out[0])
    assert out[1].startswith("error: ") and "empty" in out[1]
    assert re.match(r"^(neg|pos)\t", out[2])
    assert "loaded" in result.stderr and "checkpoint-" in result.stderr


def test_serve_errors(tmp_path: Path) -> None:
    result = subprocess.run([*SERVE, str(tmp_path), "--cpu"], input="", capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "not a run directory" in result.stderr
