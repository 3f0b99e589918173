"""x-serve's POST /embed: the embedding of each text of a JSON list, from a bi-encoder run (models
bi_encoder, bert_bi_encoder). Each text is encoded on its own by the run's processor, as x-script
build_index does, so a served embedding equals the one in an index built from the same run."""

from __future__ import annotations

from typing import Any

from xdpx.data.errors import BadLine
from xdpx.data.loading import check_text
from xdpx.serve.predictor import BadInput


def serves_embeddings(predictor: Any) -> bool:
    """Whether the run of ``predictor`` is a bi-encoder (its prediction format writes embeddings)."""
    return bool(getattr(getattr(predictor, "format", None), "embeds", False))


def embed_inputs(predictor: Any, items: list[Any]) -> list[dict[str, Any] | BadInput]:
    """``{"embedding": [...]}`` per text, or the BadInput that says why an input has none (the batcher of
    /embed calls it in the model thread, as /predict's)."""
    processor = predictor.loaded.processor
    samples, results = [], []
    for item in items:
        if not isinstance(item, str) or not item.strip():
            results.append(BadInput("an input of /embed is one non-empty text (a JSON string)"))
            continue
        try:
            sample = processor.encode([check_text(item.strip())])
        except BadLine as e:
            results.append(BadInput(str(e)))
            continue
        if len(sample["tokens1"]) == 0:
            results.append(BadInput("no tokens left after tokenization"))
            continue
        samples.append(sample)
        results.append(None)
    embedded = iter(predictor.predict_samples(samples) if samples else [])
    return [next(embedded) if r is None else r for r in results]
