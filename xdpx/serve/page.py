"""x-serve's GET /: a page to try the model in a browser, and GET /info: the run it serves.

The page is one HTML file (page.html beside this module) with its CSS and script inline: no build step,
nothing fetched from another host, so it works offline. It calls the routes any client calls (POST /predict,
and POST /explain and POST /search where this server has them) and shows what they answer: the label and
the probabilities as bars, a score, a multi-label set, NER entities marked in the text, a bi-encoder's
cosine, tokens shaded by attribution, neighbours. The run's description is put in the page at serve time as
a JSON data block (its ``<``, ``>`` and ``&`` escaped, so no name can close the block); the script puts every
string in the DOM as text. The answer carries a Content-Security-Policy that allows only same-origin
requests and the page's own inline style and script, by a nonce drawn for each answer.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from pathlib import Path
from typing import Any

from xdpx import io

PAGE_FILE = Path(__file__).with_name("page.html")
# valid.log.tsv columns that say when, not how well
_NOT_METRICS = {"epoch", "step", "samples"}


def checkpoint_metrics(save_dir: str | None, checkpoint: str | None, valid_subset: str | None
                       ) -> tuple[dict[str, float], str | None]:
    """The valid.log.tsv row of the update the checkpoint was saved at (``checkpoint-25.pt`` -> step 25):
    its loss and metrics, and what they are of (``dev at update 25``); ({}, None) when the run has no such
    row (an averaged checkpoint, a run without evaluations)."""
    found = re.fullmatch(r"checkpoint-(\d+)\.pt", os.path.basename(str(checkpoint or "")))
    path = io.join(save_dir, "valid.log.tsv") if save_dir else None
    if not found or not path or not io.exists(path):
        return {}, None
    with io.open(path) as f:
        lines = f.read().splitlines()
    header = lines[0].split("\t") if lines else []
    for line in lines[1:]:
        row = dict(zip(header, line.split("\t")))
        if row.get("step") == found.group(1):
            metrics = {}
            for name, cell in row.items():
                if name in _NOT_METRICS or name.startswith("best_") or not cell:
                    continue
                try:
                    metrics[name] = float(cell)
                except ValueError:
                    continue
            return metrics, f"{valid_subset or 'valid'} at update {found.group(1)}"
    return {}, None


def run_info(predictor: Any, routes: list[str]) -> dict[str, Any]:
    """GET /info: the run served (its folder's name, model, task, checkpoint's file name, labels), the
    metrics of that checkpoint and the data it was trained on; names only, never a filesystem path."""
    loaded = predictor.loaded
    args = loaded.run_args

    def option(name: str) -> Any:
        return getattr(args, name, None)

    save_dir = option("save_dir")
    metrics, metrics_of = checkpoint_metrics(save_dir, loaded.checkpoint, option("valid_subset"))
    data = {"data_dir": os.path.basename(str(option("data_dir") or "").rstrip("/\\")) or None,
            "train split": option("train_subset"), "valid split": option("valid_subset"),
            "samples": ", ".join(f"{k} {v}" for k, v in (option("data_size") or {}).items()) or None,
            "tokenizer": option("tokenizer"), "processor": option("processor")}
    return {**predictor.describe(),
            "run": os.path.basename(str(save_dir or "").rstrip("/\\")) or None,
            "task": option("task"), "loss": option("loss"), "major_metric": option("major_metric"),
            "metrics": metrics, "metrics_of": metrics_of,
            "data": {k: v for k, v in data.items() if v not in (None, "", [])},
            "routes": routes}


def page_response(info: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """The page with ``info`` in it, and the headers of its answer (a fresh CSP nonce each time)."""
    nonce = secrets.token_urlsafe(18)
    # inside <script type="application/json"> only "</script" could end the block: escape < > & as JSON does
    data = json.dumps(info, ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    html = _template().replace("{{NONCE}}", nonce).replace("{{INFO}}", data)
    policy = (f"default-src 'self'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; img-src 'self' data:; "
              "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
    return html, {"Content-Security-Policy": policy, "X-Content-Type-Options": "nosniff",
                  "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}


_TEMPLATE: list[str] = []


def _template() -> str:
    if not _TEMPLATE:  # read once: the file ships with the package (pyproject's package-data)
        _TEMPLATE.append(PAGE_FILE.read_text(encoding="utf-8"))
    return _TEMPLATE[0]
