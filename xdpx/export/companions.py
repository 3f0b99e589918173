"""The files an exported model travels with: vocabulary, labels, tokenizer, the run's options, and
export.json saying how to call the model (input names and order, outputs, labels, parity result)."""

from __future__ import annotations

import json
from typing import Any

from xdpx import io
from xdpx.models.choice import model_label

COPIED_FILES = ("vocab.txt", "target_map.txt", "tokenizer.json", "args.py")
EXPORT_INFO = "export.json"


def labels_of(run: Any) -> list[str] | None:
    """Class names in output order, or None for regression / unlabelled models."""
    target_map = getattr(run.processor, "target_map", None)
    return list(target_map.labels) if target_map is not None else None


def write_companions(run: Any, out_dir: str, info: dict[str, Any]) -> None:
    """Copy the run's vocabulary, labels, tokenizer and args.py into out_dir and write export.json."""
    io.makedirs(out_dir)
    for name in COPIED_FILES:
        source = io.join(run.save_dir, name)
        if not io.exists(source) and name != "args.py":
            source = io.join(run.args.data_dir, name)
        if io.exists(source):
            io.copy(source, io.join(out_dir, name))
    labels = labels_of(run)
    if labels is not None:  # one label per line, line i = output i: what deployment code reads
        with io.open(io.join(out_dir, "labels.txt"), "w") as f:
            f.write("".join(f"{label}\n" for label in labels))
    record = {"save_dir": run.save_dir, "checkpoint": run.checkpoint, "model": model_label(run.args),
              "processor": run.args.processor, "tokenizer": run.args.tokenizer,
              "max_len": run.args.get("max_len"), "pad_index": run.processor.pad_index,
              "target_type": run.args.get("target_type"), "labels": labels, **info}
    with io.open(io.join(out_dir, EXPORT_INFO), "w") as f:
        json.dump(record, f, indent=1, ensure_ascii=False)
        f.write("\n")
