"""Helpers of the x-serve tests: start ``x-serve RUN --port 0`` as a process, talk HTTP to it."""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from inference_helpers import REPO, SAMPLE

TEXTS = [line.split("\t")[0] for line in (SAMPLE / "reviews/test.txt").read_text(encoding="utf-8").splitlines()]
SERVE = [sys.executable, "-c", "from xdpx.cli import x_serve; x_serve()"]


class Server:
    """A running x-serve process: its address and the Popen."""

    def __init__(self, process: subprocess.Popen, host: str, port: int) -> None:
        self.process, self.address = process, (host, port)


@contextmanager
def running_server(run: Path, *flags: str) -> Iterator[Server]:
    """``x-serve RUN --port 0 --cpu --threads 1 FLAGS`` in its own process (one torch thread: the tests share
    the machine), stopped (SIGTERM) at the end."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen([*SERVE, str(run), "--port", "0", "--cpu", "--threads", "1", *flags], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = process.stdout.readline()
        found = re.search(r"http://([\d.]+):(\d+)", line)
        assert found, f"x-serve did not start: {line!r} {process.stderr.read() if process.poll() is not None else ''}"
        yield Server(process, found.group(1), int(found.group(2)))
    finally:
        if process.poll() is None:
            process.terminate()
        process.wait(timeout=60)
        process.stdout.close()
        process.stderr.close()


def request(address: tuple[str, int], method: str, path: str, body: bytes | None = None,
            headers: dict[str, str] | None = None, connection: http.client.HTTPConnection | None = None
            ) -> tuple[int, Any, dict[str, str]]:
    """(status, the JSON answer (or the text when it is not JSON), headers); a connection given is kept."""
    own = connection is None
    connection = connection or http.client.HTTPConnection(*address, timeout=60)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        raw = response.read().decode("utf-8")
        try:
            answer = json.loads(raw)
        except json.JSONDecodeError:
            answer = raw
        return response.status, answer, dict(response.getheaders())
    finally:
        if own:
            connection.close()


def expected_predictions(run: Path) -> dict[str, dict[str, Any]]:
    """Each test text predicted alone, in this process (the server batches it with others)."""
    from xdpx.serve.predictor import load_predictor

    predictor = load_predictor(str(run), cpu=True)
    return {text: predictor.predict_samples([predictor.encode(text)])[0] for text in TEXTS}


def matches(answer: Any, texts: list[str], expected: dict[str, dict[str, Any]]) -> bool:
    """The answer holds the prediction of each text as predicted alone."""
    return isinstance(answer, list) and len(answer) == len(texts) and all(
        a["label"] == expected[t]["label"] and abs(a["prob"] - expected[t]["prob"]) < 1e-5
        and abs(sum(a["probabilities"].values()) - 1) < 1e-6 for a, t in zip(answer, texts))
