"""x-serve's POST /explain: the prediction of each input with its token attributions (Integrated Gradients,
xdpx/inference/explain.py). The body is /predict's: a JSON list of inputs, each a line in the training
format or the list of a sample's texts. Each answer is /predict's object with the attributions added:

    {"label": "pos", "prob": 0.93, "probabilities": {...},
     "target": "pos", "output": 2.31, "baseline_output": -0.12, "delta": 0.0004,
     "tokens": [["这", 0.01], ["酒店", 0.42], ...], "tokens_b": [...]}          (tokens_b: pair models)

NER: each of the answer's ``entities`` gets its own ``target``, ``output``, ``baseline_output``, ``delta``
and ``tokens``. Query ``?baseline=pad|mask|zeros&n_steps=N`` (default pad, 50). An input that cannot be
explained (empty, longer than the run's max_len, the wrong number of texts) is a 422 naming it.
Explanations run in the model thread, batched by their own Batcher (each sample is n_steps passes wide).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from xdpx.errors import UserError
from xdpx.inference import BASELINES, Unsupported, check_explainable, encode_texts, explain_samples
from xdpx.serve.answering import answer_inputs
from xdpx.serve.batching import Batcher
from xdpx.serve.predictor import BadInput

EXPLAIN_BATCH = 8  # samples per pass of the model thread: each is n_steps forward and backward passes
MAX_STEPS = 512


def explain_batcher(predictor: Any, max_wait: float, max_queue: int, on_batch: Any, executor: Any) -> Batcher:
    """The Batcher of /explain, in the model thread of /predict's (``executor``)."""
    def run(jobs: list[tuple[Any, str, int]]) -> list[Any]:
        return explain_inputs(predictor, jobs)

    return Batcher(run, EXPLAIN_BATCH, max_wait, max_queue, on_batch, executor)


def texts_of(predictor: Any, item: Any) -> list[str]:
    """The texts of an input as /predict reads them (a line of the training format, or the list of texts)."""
    if isinstance(item, list):
        return [t.strip() for t in item]
    if getattr(predictor.parser, "text_requests", False):
        return [item.strip()]
    columns = predictor.parser.parse(item.rstrip("\r\n"))
    texts, _label = predictor.loader.fields(columns, predictor.loader.layout_of(columns))
    return [t.strip() for t in texts]


def explain_inputs(predictor: Any, jobs: list[tuple[Any, str, int]]) -> list[dict[str, Any] | BadInput]:
    """Per input: /predict's answer with the attributions, or the BadInput saying why there is none."""
    processor = predictor.loaded.processor
    results: list[Any] = []
    for item, _baseline, _steps in jobs:
        try:
            predictor.encode(item)  # /predict's checks: the shape, empty texts, NUL characters
            texts = texts_of(predictor, item)
            results.append((encode_texts(processor, texts), texts))
        except (BadInput, UserError) as e:
            results.append(BadInput(str(e)))
    groups: dict[tuple[str, int], list[int]] = {}
    for index, ((_item, baseline, steps), result) in enumerate(zip(jobs, results)):
        if not isinstance(result, BadInput):
            groups.setdefault((baseline, steps), []).append(index)
    for (baseline, steps), indices in groups.items():
        samples = [results[i][0] for i in indices]
        with predictor.lock:
            explained = explain_samples(predictor.loaded, samples, [results[i][1] for i in indices], baseline, steps)
        answers = predictor.predict_samples(samples)
        for i, answer, parts in zip(indices, answers, explained):
            results[i] = with_attributions(answer, parts)
    return results


def with_attributions(answer: dict[str, Any], parts: list[Any]) -> dict[str, Any]:
    """/predict's answer with the explanation(s) added (NER: into each entity)."""
    if "entities" in answer:
        for entity, part in zip(answer["entities"], parts):
            details = part.as_dict()
            details.pop("entity", None)
            entity.update(details)
        return answer
    return {**answer, **parts[0].as_dict()} if parts else answer


def explain_route(state: Any, json_response: Callable[..., Response],
                  error: Callable[..., Response]) -> Callable[[Request], Awaitable[Response]]:
    """The handler of POST /explain (``state.explainer``: the Batcher of :func:`explain_batcher`)."""
    try:
        check_explainable(state.predictor.loaded.run_args)
        refusal = None
    except Unsupported as e:
        refusal = str(e)
    if getattr(state.predictor, "backend", "pytorch") == "onnxruntime":  # no gradients through onnxruntime
        refusal = "explain: this server runs an ONNX export, which gives no gradients: serve the run directory"

    async def explain(request: Request) -> Response:
        if refusal is not None:
            return error(404, f"POST /explain: {refusal}; use POST /predict")
        baseline = request.query_params.get("baseline", "pad")
        if baseline not in BASELINES:
            return error(422, f"baseline {baseline!r}: use one of {', '.join(BASELINES)}")
        try:
            steps = int(request.query_params.get("n_steps", "50"))
        except ValueError:
            steps = 0
        if not 1 <= steps <= MAX_STEPS:
            return error(422, f"n_steps {request.query_params.get('n_steps')!r}: a whole number from 1 to {MAX_STEPS}")
        # Unsupported is found only on the first batch (a model that joins its texts before the lookup)
        answers = await answer_inputs(request, state, state.explainer, error, "explanation",
                                      jobs=lambda inputs: [(item, baseline, steps) for item in inputs],
                                      bad_input_status=422,
                                      refused=(Unsupported, lambda e: f"POST /explain: {e}; use POST /predict"))
        return answers if isinstance(answers, Response) else json_response(answers)

    return explain
