"""x-pred ``explain: true``: the prediction columns, then each sample's token attributions
(xdpx/inference/explain.py) as JSON cells.

    attributions         [["这", 0.01], ["家", 0.02], ["酒店", 0.31], ...]   (word, score) of the first text
    attributions_b       the same for the second text (pair models only)
    attribution_delta    sum of the scores - (output - baseline output): the completeness check

NER: ``attributions`` lists the entities, each with its own tokens and delta
(``[{"entity": {...}, "target": "LOC", "tokens": [...], "delta": ...}]``), and ``attribution_delta`` is the
largest |delta| of the sample's entities (empty without entities).
"""

from __future__ import annotations

import json
from typing import Any

from xdpx.config.errors import ConfigError
from xdpx.errors import UserError
from xdpx.inference.explain import (
    Explanation,
    Unsupported,
    check_explainable,
    explain_samples,
    word_scores,
)


def attach_texts(encoded: Any, loader: Any) -> None:
    """Each sample of a raw chunk gets its raw ``texts`` (to show the words as spelled, and to see
    whether max_len cut it)."""
    for sample, columns in zip(encoded.samples, encoded.columns):
        if "text" in sample:  # NER samples carry their text and the units' offsets already
            continue
        texts, _label = loader.fields(columns, loader.layout_of(columns))
        sample["texts"] = [t.strip() for t in texts]


class ExplainedFormat:
    """A prediction format (xdpx.inference.outputs) with the attribution columns after its own."""

    def __init__(self, inner: Any, loaded: Any, args: Any, where: str) -> None:
        self.inner, self.loaded, self.args, self.where = inner, loaded, args, where
        self.name = ""  # the input being written, for the messages
        self.pairs = loaded.processor.num_texts > 1

    def names(self) -> list[str]:
        return self.inner.names() + ["attributions"] + (["attributions_b"] if self.pairs else []) \
            + ["attribution_delta"]

    def rows(self, logits: Any, samples: list[dict[str, Any]]) -> list[list[str]]:
        for sample in samples:
            self.check(sample)
        try:
            explained = explain_samples(self.loaded, samples, [s.get("texts") for s in samples],
                                        self.args.explain_baseline, self.args.explain_steps)
        except UserError as e:
            raise ConfigError(f"{self.where}: key 'explain': {e}") from None
        return [row + self.cells(parts) for row, parts in zip(self.inner.rows(logits, samples), explained)]

    def check(self, sample: dict[str, Any]) -> None:
        """A sample that max_len cut cannot be explained whole: exit 2 naming the record."""
        texts = sample.get("texts")
        if texts is None:
            return
        processor = self.loaded.processor
        built = processor.numerize_batch([texts])[0]
        if built is not None and built[1]:
            count = sum(len(ids) for ids in processor.ids_batch(texts))
            raise ConfigError(f"{self.where}: key 'explain': {self.name}:{sample.get('id')}: a text of {count} tokens; "
                              f"the run reads at most max_len {processor.max_len} (special tokens included) and cut "
                              "the rest, which would get no share: shorten it, or predict it without explain")

    def cells(self, parts: list[Explanation]) -> list[str]:
        def dumps(value: Any) -> str:
            return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

        if getattr(self.loaded.processor, "target_field", None) is not None:  # NER: one explanation per entity
            entities = [{"entity": p.entity, "target": p.target, "tokens": word_scores(p.tokens[0]),
                         "delta": p.delta} for p in parts]
            worst = max((abs(p.delta) for p in parts), default=None)
            return [dumps(entities)] + ([""] if self.pairs else []) + ["" if worst is None else f"{worst:.3g}"]
        part = parts[0]
        out = [dumps(word_scores(part.tokens[0]))]
        if self.pairs:
            out.append(dumps(word_scores(part.tokens[1])) if len(part.tokens) > 1 else "[]")
        return out + [f"{part.delta:.3g}"]

    def arrays(self, logits: Any, numbers: list[int]) -> Any:
        return self.inner.arrays(logits, numbers)

    def records(self, logits: Any, samples: list[dict[str, Any]]) -> Any:
        return self.inner.records(logits, samples)


def check_explain(args: Any, run_args: Any) -> None:
    """x-pred with explain: true on a run it cannot explain (a language model, a bi-encoder): exit 2
    before the model loads."""
    if not args.explain:
        return
    try:
        check_explainable(run_args)
    except Unsupported as e:
        raise ConfigError(f"{args.source('explain')}: key 'explain': {e}") from None
