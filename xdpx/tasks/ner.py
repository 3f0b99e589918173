"""The ``ner`` task: token classification. Training and evaluation are the loss's (token_cross_entropy);
the task adds decoding for x-pred / x-serve and how they render predictions: entity spans of the input.

    x-pred TSV:    ... <TAB>entities                       [{"text": "北京", "type": "LOC", "start": 3, "end": 5}]
    x-serve:       {"entities": [{"text": ..., "type": ..., "start": ..., "end": ...}], "tags": ["O", ...]}

``start`` / ``end`` are character offsets into the input text (end exclusive), so text[start:end] is the
entity. A unit past max_len gets no tag (the processor keeps whole units up to max_len).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import torch
from torch import nn

from xdpx.config.options import Rule
from xdpx.data.tags import entity_spans
from xdpx.losses.ner import decode, unit_scores
from xdpx.tasks import tasks
from xdpx.tasks.default import Task


@tasks.register("ner")
class TokenClassificationTask(Task):
    """Tags per unit (characters or words) with the ner / bert_ner processors and the lstm_ner / bert_ner models."""

    options = [Rule(lambda a: a.loss == "token_cross_entropy", "task ner trains with loss: token_cross_entropy",
                    keys=("task", "loss"))]

    @torch.no_grad()
    def inference_step(self, model: nn.Module, batch: dict[str, Any]) -> torch.Tensor:
        """Decoded tag ids ``[B, U]``, -1 after each sentence's last unit."""
        scores, real = unit_scores(model(**batch["net_input"]), batch["unit_mask"])
        return decode(model, scores, real)

    def prediction_format(self, args: Any, labels: list[str] | None) -> EntityPredictions:
        return EntityPredictions(labels or [])


class EntityPredictions:
    """x-pred's ``entities`` column (a JSON list per line; ``binary: true``: tag ids) and x-serve's records."""

    def __init__(self, labels: list[str]) -> None:
        self.labels = labels

    def names(self) -> list[str]:
        return ["entities"]

    def tags(self, row: np.ndarray) -> list[str]:
        return [self.labels[int(k)] for k in row if k >= 0]

    def entities(self, row: np.ndarray, sample: dict[str, Any]) -> list[dict[str, Any]]:
        """The entities of one sample: spans of its raw text when it has one (x-pred on raw files, x-serve),
        else unit indices and the units' text (x-pred on a split of data_dir)."""
        tags = self.tags(row)
        text, offsets = sample.get("text"), sample.get("offsets")
        out = []
        for begin, end, kind in entity_spans(tags):
            if offsets is not None and text is not None:
                start, stop = offsets[begin][0], offsets[end - 1][1]
                out.append({"text": text[start:stop], "type": kind, "start": int(start), "end": int(stop)})
            else:
                out.append({"type": kind, "start": begin, "end": end})
        return out

    def rows(self, outputs: np.ndarray, samples: list[dict[str, Any]]) -> list[list[str]]:
        return [[json.dumps(self.entities(row, sample), ensure_ascii=False)] for row, sample in zip(outputs, samples)]

    def arrays(self, outputs: np.ndarray, numbers: list[int]) -> dict[str, np.ndarray]:
        return {"record": np.asarray(numbers, dtype=np.int64), "tags": np.asarray(outputs, dtype=np.int64).reshape(
            len(numbers), -1), "labels": np.asarray(self.labels, dtype=str)}

    def records(self, outputs: np.ndarray, samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{"entities": self.entities(row, sample), "tags": self.tags(row)}
                for row, sample in zip(outputs, samples)]
