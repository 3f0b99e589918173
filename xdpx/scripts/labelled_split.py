"""What x-script calibrate and x-script errors share: a run loaded from its directory, and the logits, gold
labels and texts of one labelled split of it (a split name of the run's data_dir, or a raw labelled file
or table in the training format), predicted as x-pred predicts (the same chunks, batches and processor)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from xdpx.command import COMMON_OPTIONS
from xdpx.config.errors import ConfigError
from xdpx.config.options import resolve
from xdpx.inference.encoding import encode_source
from xdpx.inference.evaluate import locate
from xdpx.inference.loading import check_checkpoint, load_model, run_options
from xdpx.inference.options import LOAD_OPTIONS, RAW_DATA_OPTIONS
from xdpx.inference.predict import split_chunks


@dataclass
class SplitOutputs:
    """``logits`` (float64, ``[N, C]`` or ``[N]`` for one sigmoid logit), integer ``targets`` ``[N]``, each
    sample's ``texts`` (a pair's texts joined by `` ||| ``), for the split ``name``; ``samples`` (the
    encoded samples) and ``raw_texts`` (a raw file's texts per field as spelled; None for a split of
    data_dir, whose text is decoded from its tokens) let the attributions of some of them be computed."""

    name: str
    logits: np.ndarray
    targets: np.ndarray
    texts: list[str]
    samples: list[dict[str, Any]]
    raw_texts: list[list[str] | None]


def load_run(save_dir: str, checkpoint: str | None, batch_size: int | None, tool: str) -> tuple[Any, Any]:
    """``(args, loaded)``: the run's best checkpoint (or ``checkpoint``) on the CPU, for ``x-script tool``."""

    config: dict[str, Any] = {"save_dir": save_dir, "checkpoint": checkpoint, "batch_size": batch_size, "cuda": False}
    args = resolve({k: v for k, v in config.items() if v is not None}, COMMON_OPTIONS + LOAD_OPTIONS + RAW_DATA_OPTIONS,
                   tool, origin=f"x-script {tool}")
    run_args = run_options(args)
    check_checkpoint(args)
    return args, load_model(args, run_args)


def locate_split(loaded: Any, name: str, tool: str) -> Any:
    """The split name of data_dir, or the raw source a file names; a ConfigError (exit 2) for anything else."""
    from xdpx.runtime.corpus import CorpusSubset  # lazy: torch, only once a run is loaded

    source = locate(name, loaded.data_dir, "--split", f"x-script {tool}", loaded.run_args)
    if isinstance(source, CorpusSubset):
        raise ConfigError(f"x-script {tool}: --split {name!r} is a BEIR corpus: give a labelled split of a classifier")
    return source


def predict_split(loaded: Any, args: Any, name: str, tool: str) -> SplitOutputs:
    """The raw logits, gold labels and texts of the labelled split ``name`` (module docstring)."""
    import torch  # lazy: x-script --help imports the tools' modules

    from xdpx.data.composition import build_loader  # lazy: the run's components, once a run is loaded
    from xdpx.runtime.scoring import predict_logits  # lazy: torch, only once a run is loaded

    source = locate_split(loaded, name, tool)
    is_split = isinstance(source, str)
    chunks = split_chunks(loaded, source, None) if is_split else \
        encode_source(source, loaded.run_args, loaded.processor.data_dir, args.workers, args.skip_bad_lines)
    loader = None if is_split else build_loader(loaded.run_args)
    logits, targets, texts, samples, raw_texts = [], [], [], [], []
    for encoded in chunks:
        if encoded.samples and not encoded.labelled:
            raise ConfigError(f"x-script {tool}: --split {name!r} has no labels: give a labelled split (dev, test, or "
                              "a file in the training format with its label column); nothing written")
        if not encoded.samples:
            continue
        logits.append(predict_logits(loaded.task, loaded.model, loaded.processor, encoded.samples, loaded.batch_size,
                                     loaded.autocast, loaded.to_device, progress=f"x-script {tool} {name}"))
        targets.extend(int(s["target"]) for s in encoded.samples)
        samples.extend(encoded.samples)
        for columns in encoded.columns:
            if is_split:
                texts.append(columns[0])
                raw_texts.append(None)
            else:
                cells = list(getattr(columns, "origin", columns))
                fields = [cells[c % len(cells)].strip() for c in loader.text_columns] if cells else []
                texts.append(" ||| ".join(fields))
                raw_texts.append(fields or None)
    if not targets:
        raise ConfigError(f"x-script {tool}: --split {name!r} holds no samples; nothing written")
    return SplitOutputs(name, torch.cat(logits).double().numpy(), np.asarray(targets, dtype=np.int64), texts, samples,
                        raw_texts)
