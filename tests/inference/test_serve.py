"""x-serve: malformed requests under concurrent load (every answer checked, the server keeps serving),
/health without paths, /openapi.json, /metrics, batching across requests, the interactive mode."""

from __future__ import annotations

import asyncio
import json
import random
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from serve_helpers import SERVE, TEXTS, Server, expected_predictions, matches, request, running_server


@pytest.fixture(scope="module")
def server(cnn_run: Path) -> Iterator[Server]:
    with running_server(cnn_run, "--batch_size", "16") as running:
        yield running
        assert running.process.poll() is None, "the server died"


MALFORMED = [
    (b"not json", "the body is not JSON", 400),
    (b'{"text": "a dict"}', "send a non-empty JSON list", 400),
    (b"[]", "send a non-empty JSON list", 400),
    (json.dumps(["ok", ""]).encode(), "input 1: empty text", 400),
    (json.dumps(["ok", 3]).encode(), "input 1: an input is a string", 400),
    (json.dumps([["one", "two"]]).encode(), "input 0: expected 1 text(s), got 2", 400),
    (b"\xff\xfe", "the body is not JSON: it is not UTF-8", 400),
    (b"[NaN]", "NaN, which is not a JSON number", 400),
]


def test_http_survives_malformed_requests_under_concurrent_load(server: Server, cnn_run: Path) -> None:
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
                    got, answer, _ = request(server.address, "POST", "/predict", body)
                    ok = got == status and message in answer.get("error", "")
                    key = "bad"
                elif kind == 1 and j % 8 == 1:
                    got, answer, _ = request(server.address, "GET", "/health")
                    ok, key = got == 200 and answer["status"] == "ok" and answer["labels"] == ["neg", "pos"], "ok"
                else:  # 1 to 6 real texts
                    texts = rng.sample(TEXTS, rng.randint(1, 6))
                    got, answer, _ = request(server.address, "POST", "/predict", json.dumps(texts).encode("utf-8"),
                                             {"Content-Type": "application/json"})
                    ok, key = got == 200 and matches(answer, texts, expected), "ok"
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
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "requests hung"
    assert not failures, "\n".join(failures[:10])
    assert counts["bad"] >= 40 and counts["ok"] + counts["bad"] == 200
    # still serving, and the other answers of a bad request
    status, answer, _ = request(server.address, "POST", "/predict", json.dumps(TEXTS[:3]).encode())
    assert status == 200 and matches(answer, TEXTS[:3], expected)
    status, answer, _ = request(server.address, "GET", "/nope")
    assert status == 404 and "use POST /predict" in answer["error"]
    status, answer, _ = request(server.address, "GET", "/predict")
    assert status == 405 and "GET /predict is not served" in answer["error"]
    assert request(server.address, "POST", "/predict", b'["x"]', {"Content-Length": "abc"})[0] == 400
    assert request(server.address, "GET", "/health")[0] == 200


def test_health_ready_openapi_and_metrics(server: Server, cnn_run: Path) -> None:
    status, health, _ = request(server.address, "GET", "/health")
    assert status == 200 and health["model"] == "cls_cnn" and re.fullmatch(r"checkpoint-\d+\.pt", health["checkpoint"])
    text = json.dumps(health)
    assert str(cnn_run) not in text and "/" not in text, f"/health reveals a path: {text}"
    assert request(server.address, "GET", "/ready")[:2] == (200, {"status": "ready", "queued_samples": 0})

    status, schema, _ = request(server.address, "GET", "/openapi.json")
    assert status == 200 and schema["openapi"].startswith("3.")
    assert set(schema["paths"]) == {"/predict", "/explain", "/health", "/ready", "/metrics", "/info", "/"}
    body = schema["paths"]["/predict"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["type"] == "array" and body["maxItems"] == 256
    assert schema["components"]["schemas"]["Prediction"]["oneOf"][0]["properties"]["label"]["enum"] == ["neg", "pos"]

    def counter(text: str, route: str, status: str) -> float:
        found = re.search(rf'^xdpx_serve_requests_total\{{route="{re.escape(route)}",status="{status}"\}} (\S+)$',
                          text, re.M)
        return float(found.group(1)) if found else 0.0

    before = request(server.address, "GET", "/metrics")[1]
    for _ in range(3):
        assert request(server.address, "POST", "/predict", json.dumps(TEXTS[:2]).encode())[0] == 200
    assert request(server.address, "POST", "/predict", b"[]")[0] == 400
    status, after, headers = request(server.address, "GET", "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    assert counter(after, "/predict", "200") - counter(before, "/predict", "200") == 3
    assert counter(after, "/predict", "400") - counter(before, "/predict", "400") == 1
    samples = float(re.search(r"^xdpx_serve_samples_total (\S+)$", after, re.M).group(1))
    assert samples >= 6 and "xdpx_serve_request_seconds_bucket" in after and "xdpx_serve_batch_samples" in after


def test_requests_are_batched_together(cnn_run: Path) -> None:
    """Concurrent requests share forward passes: fewer passes than requests, each answer its own."""
    from xdpx.serve.batching import Batcher
    from xdpx.serve.predictor import load_predictor

    predictor = load_predictor(str(cnn_run), cpu=True)
    passes: list[int] = []

    def counting(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        passes.append(len(samples))
        return predictor.predict_samples(samples)

    async def ask_all() -> list[Any]:
        batcher = Batcher(counting, batch_size=64, max_wait=0.2, max_queue=100)
        batcher.start()
        try:
            return await asyncio.gather(*(batcher.predict([predictor.encode(t)]) for t in TEXTS[:12]))
        finally:
            await batcher.stop()

    answers = asyncio.run(ask_all())
    assert sum(passes) == 12 and len(passes) < 12
    for text, answer in zip(TEXTS[:12], answers):
        alone = predictor.predict_samples([predictor.encode(text)])[0]
        assert answer[0]["label"] == alone["label"] and abs(answer[0]["prob"] - alone["prob"]) < 1e-5


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
    result = subprocess.run([*SERVE, str(tmp_path), "--max_inputs", "50", "--max_queue", "10"], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 2 and "--max_inputs 50 is over --max_queue 10" in result.stderr
