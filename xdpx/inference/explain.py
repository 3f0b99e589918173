"""Token attributions: which tokens made the model choose its label, by Integrated Gradients (Sundararajan
et al., 2017, through Captum) over the word embeddings (docs/inference.md, "Token attributions").

    from xdpx.inference.explain import explain_texts
    explain_texts(loaded, [["这家酒店很好"]])   # [[Explanation(target='pos', tokens=[[('这', 0.01), ...]], delta=...)]]

For each sample the model's output ``F`` is explained: the logit of the predicted label (one output:
the score or the single logit), or for NER each predicted entity's tag scores summed over its units.
The word vectors of the text's tokens are moved from a baseline (``pad``: the padding token's vector,
``mask``: the mask token's, ``zeros``) to their own along a straight line, and the gradients of ``F``
along the way, times the distance, give each token its share. Special tokens ([CLS], [SEP]) and the
positions keep their own vectors, so their share is zero and the shares of the text's tokens add up to
``F(input) - F(baseline)``: ``delta`` (Captum's convergence delta: the sum minus that difference) says
how closely, per sample; more ``n_steps`` make it smaller.

Every model whose word embeddings are looked up from its text fields as they are (``tokens``,
``tokens1`` / ``tokens2``, ``input_ids``) is covered: TextCNN, BiLSTM, our BERT, the transformers family,
re2, match_cnn, the pair models (both texts), NER. The hook sits on the ``nn.Embedding`` modules and
recognises a field by the very tensor passed in, so nothing per model is written here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from xdpx.data.tags import entity_spans
from xdpx.errors import UserError
from xdpx.inference.explain_options import BASELINES
from xdpx.inference.explain_words import merged, piece_words, text_words
from xdpx.models.choice import head_name, model_label
from xdpx.utils.optional import require

# heads with no label per text: why
NO_LABEL = {"mlm": "is a masked language model", "pretrain": "is a pretraining model",
            "bi_encoder": "gives embeddings"}
TEXT_FIELDS = ("tokens", "tokens1", "tokens2", "input_ids")


@dataclass
class Explanation:
    """The attributions of one output: ``tokens`` holds, per text of the sample, ``(word, score)`` in the
    text's own words; the scores add up to ``output - baseline_output`` within ``delta``."""

    target: str | None  # the label (NER: the entity's type) whose score is explained; None: a score
    output: float  # F(input)
    baseline_output: float  # F(baseline)
    delta: float  # sum of the scores - (output - baseline_output)
    tokens: list[list[tuple[str, float]]]
    entity: dict[str, Any] | None = field(default=None)  # NER: text, type, start, end

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (x-serve's /explain): tokens (and tokens_b) as [word, score] lists."""
        out: dict[str, Any] = {"target": self.target, "output": self.output, "baseline_output": self.baseline_output,
                               "delta": self.delta, "tokens": word_scores(self.tokens[0])}
        if len(self.tokens) > 1:
            out["tokens_b"] = word_scores(self.tokens[1])
        if self.entity is not None:
            out["entity"] = self.entity
        return out


def word_scores(tokens: list[tuple[str, float]]) -> list[list[Any]]:
    """``[[word, score], ...]`` for JSON, the scores to 6 significant digits."""
    return [[word, float(f"{score:.6g}")] for word, score in tokens]


class Unsupported(UserError):
    """A run whose model cannot be explained this way (the message says why)."""


def check_explainable(run_args: Any) -> None:
    """Refuse, before any work, a run with no label per text to explain (language models, bi-encoders)."""
    head = head_name(run_args)
    if head in NO_LABEL:
        raise Unsupported(f"explain: model {model_label(run_args)} {NO_LABEL[head]}: it has no label to explain")


def encode_texts(processor: Any, texts: list[str]) -> dict[str, Any]:
    """The sample of one input's texts, refused (UserError, one line) when it cannot be explained whole:
    the wrong number of texts, an empty text, or more tokens than the run's max_len (cut tokens would
    get no share)."""
    wanted = processor.num_texts
    if len(texts) != wanted:
        shape = "one text" if wanted == 1 else f"{wanted} texts (a pair: text and text_b)"
        raise UserError(f"this run's model reads {shape}; the input has {len(texts)}")
    if not all(isinstance(t, str) and t.strip() for t in texts):
        raise UserError("an empty text: there is nothing to explain")
    built = processor.numerize_batch([[t.strip() for t in texts]])[0]
    if built is None:
        raise UserError(f"a text shorter than the run's min_len ({processor.min_len} tokens)")
    sample, truncated = built
    if truncated:
        count = sum(len(ids) for ids in processor.ids_batch([t.strip() for t in texts]))
        raise UserError(f"a text of {count} tokens: the run reads at most max_len {processor.max_len} tokens, "
                        "special tokens included, and would cut the rest, which then gets no share; shorten it")
    sample["id"] = 0
    return sample


def explain_texts(loaded: Any, inputs: list[list[str]], baseline: str = "pad",
                  n_steps: int = 50) -> list[list[Explanation]]:
    """:func:`explain_samples` of raw inputs (each the list of a sample's texts), checked by
    :func:`encode_texts` first: a bad input stops everything with its number."""
    samples = []
    for number, texts in enumerate(inputs):
        try:
            samples.append(encode_texts(loaded.processor, texts))
        except UserError as e:
            raise UserError(f"input {number}: {e}") from None
    return explain_samples(loaded, samples, [[t.strip() for t in texts] for texts in inputs], baseline, n_steps)


def special_ids(processor: Any) -> set[int]:
    """Token ids the processor adds around the texts ([CLS], [SEP], a template's own)."""
    template = getattr(processor, "template", None)
    if template is not None:
        return {int(value) for kind, value, _ in template.parts if kind == "special"}
    return {int(i) for i in (getattr(processor, "cls_index", None), getattr(processor, "sep_index", None))
            if i is not None}


def baseline_id(processor: Any, baseline: str) -> int | None:
    """The token whose vector stands for "no token" (None for zeros)."""
    if baseline == "zeros":
        return None
    if baseline == "pad":
        return int(processor.pad_index)
    words = [processor.args.get("mask_word"), "[MASK]", "<mask>"]
    found = [processor.dictionary.special_index(w) for w in words if w]
    found = [i for i in found if i is not None]
    if not found:
        raise UserError("explain_baseline: mask needs a mask token ([MASK] or <mask>) in the run's vocabulary, "
                        "which this one has not: use pad or zeros")
    return int(found[0])


def text_runs(ids: Sequence[int], real: int, specials: set[int]) -> list[list[int]]:
    """The positions of each text in a field: runs of real, non-special positions."""
    runs: list[list[int]] = []
    previous_special = True
    for position in range(real):
        if int(ids[position]) in specials:
            previous_special = True
            continue
        if previous_special:
            runs.append([])
        runs[-1].append(position)
        previous_special = False
    return runs


class EmbeddingHooks:
    """Forward hooks on every ``nn.Embedding`` of the model: record the output of each lookup of a text
    field, or put given vectors in its place (the IG path)."""

    def __init__(self, model: Any) -> None:
        import torch  # lazy: x-pred imports this module at start, --dry included, which needs no torch

        self.modules = [m for m in model.modules() if isinstance(m, torch.nn.Embedding)]
        self.fields: dict[int, str] = {}  # id(tensor) -> field name, for the pass under way
        self.calls: list[tuple[str, Any, Any]] = []  # (field, module, output) of a recording pass
        self.replace: dict[str, Any] | None = None

    def hook(self, module: Any, inputs: tuple[Any, ...], output: Any) -> Any:
        name = self.fields.get(id(inputs[0])) if inputs else None
        if name is None:
            return None
        if self.replace is not None:
            return self.replace[name]
        self.calls.append((name, module, output))
        return None

    def run(self, model: Any, net_input: dict[str, Any], replace: dict[str, Any] | None = None) -> Any:
        self.fields = {id(v): k for k, v in net_input.items() if k in TEXT_FIELDS}
        self.replace, self.calls = replace, []
        handles = [m.register_forward_hook(self.hook) for m in self.modules]
        try:
            return model(**net_input)
        finally:
            for handle in handles:
                handle.remove()
            self.fields, self.replace = {}, None


def explain_samples(loaded: Any, samples: list[dict[str, Any]], texts: list[list[str] | None] | None = None,
                    baseline: str = "pad", n_steps: int = 50, batch_size: int | None = None) -> list[list[Explanation]]:
    """Per sample the explanation of its predicted label (one), or of each predicted entity (NER: one per
    entity, none when it found none). ``texts``: each sample's raw texts, to show the words as spelled
    (None: from the tokens). ``batch_size``: samples per IG pass (each is ``n_steps`` forward and backward
    passes wide); default: the run's batch size over ``n_steps``, at least 1."""
    require("captum", "explain")  # one clear line when the package is missing
    if baseline not in BASELINES:
        raise UserError(f"explain_baseline: {baseline!r} is not one of {', '.join(BASELINES)}")
    check_explainable(loaded.run_args)
    texts = texts or [None] * len(samples)
    size = batch_size or max(1, loaded.batch_size // max(1, n_steps // 8))
    out: list[list[Explanation]] = []
    for start in range(0, len(samples), size):
        out.extend(_explain_batch(loaded, samples[start: start + size], texts[start: start + size], baseline, n_steps))
    return out


def _explain_batch(loaded: Any, samples: list[dict[str, Any]], texts: list[Any], baseline: str,
                   n_steps: int) -> list[list[Explanation]]:
    import torch  # lazy: x-pred imports this module at start, --dry included, which needs no torch
    from captum.attr import IntegratedGradients  # lazy: optional package, only for explain

    model, processor = loaded.model, loaded.processor
    batch = processor.collate(samples)
    net_input = {k: v for k, v in loaded.to_device(batch["net_input"]).items() if v is not None}
    hooks = EmbeddingHooks(model)
    with torch.no_grad():
        outputs = hooks.run(model, net_input)
    if not hooks.calls:
        raise Unsupported(f"explain: model {model_label(loaded.run_args)} does not look its word vectors up from the "
                          "text fields as they are (it joins or splits the texts first): its tokens cannot be explained")
    names = [name for name, _, _ in hooks.calls]
    inputs = tuple(output.detach().float() for _, _, output in hooks.calls)
    specials, fill = special_ids(processor), baseline_id(processor, baseline)
    baselines = []
    for (name, module, _output), own in zip(hooks.calls, inputs):
        ids = net_input[name]
        content = _content_mask(ids, processor, specials)
        with torch.no_grad():
            empty = torch.zeros_like(own) if fill is None else module(torch.full_like(ids, fill)).float()
        baselines.append(torch.where(content.unsqueeze(-1), empty, own))
    keys = list(net_input)
    regression = loaded.regression or outputs.dim() == 1
    ner = getattr(processor, "target_field", None) is not None and "unit_mask" in batch
    rows = list(range(len(samples)))
    select, targets, entities = None, None, [[] for _ in samples]
    if ner:
        labels = processor.target_map.labels
        tags = loaded.task.inference_step(model, {**batch, "net_input": net_input}).cpu()
        unit_mask = batch["unit_mask"]
        rows, picks = [], []
        for b in range(len(samples)):
            positions = unit_mask[b].nonzero().flatten().tolist()
            row_tags = [labels[int(k)] for k in tags[b] if k >= 0]
            for begin, end, kind in entity_spans(row_tags):
                rows.append(b)
                picks.append([(positions[u], int(tags[b][u])) for u in range(begin, end)])
                entities[b].append((begin, end, kind))
        if not rows:
            return [[] for _ in samples]
        select = torch.zeros((len(rows), outputs.size(1), outputs.size(2)), device=outputs.device)
        for r, pick in enumerate(picks):
            for position, tag in pick:
                select[r, position, tag] = 1.0
    elif not regression:
        targets = outputs.float().argmax(dim=-1)
    index = torch.tensor(rows, device=inputs[0].device)
    inputs = tuple(t.index_select(0, index) for t in inputs)
    baselines = [t.index_select(0, index) for t in baselines]
    extra = tuple(net_input[k].index_select(0, index) for k in keys)

    def forward(*args: Any) -> Any:
        embedded, given = args[: len(names)], dict(zip(keys, args[len(names): len(names) + len(keys)]))
        chosen = args[-1] if select is not None else None
        result = hooks.run(model, given, dict(zip(names, embedded))).float()
        if chosen is not None:
            return (result * chosen).sum(dim=(1, 2))
        return result

    additional = extra + ((select,) if select is not None else ())
    target = None if targets is None else targets.index_select(0, index)
    # gradients in float32, also when the caller runs under no_grad or autocast
    with torch.enable_grad(), torch.autocast(device_type=loaded.device.type, enabled=False):
        ig = IntegratedGradients(forward)
        scores, deltas = ig.attribute(inputs, tuple(baselines), target=target, additional_forward_args=additional,
                                      n_steps=n_steps, method="gausslegendre", return_convergence_delta=True)
        with torch.no_grad():
            at_input, at_baseline = (_picked(forward(*x, *additional), target) for x in (inputs, tuple(baselines)))
    per_token = {name: s.sum(dim=-1).detach().cpu() for name, s in zip(names, scores)}
    results: list[list[Explanation]] = [[] for _ in samples]
    counts = [0] * len(samples)
    for r, b in enumerate(rows):
        sample_texts, entity = texts[b], None
        if ner:
            begin, end, kind = entities[b][counts[b]]
            counts[b] += 1
            tokens = _unit_tokens(processor, samples[b], per_token, r, names, specials)
            entity = _entity(samples[b], begin, end, kind)
            target_name = kind
        else:
            tokens = _text_tokens(processor, samples[b], sample_texts, per_token, r, names, specials)
            target_name = None if target is None else processor.target_map.labels[int(target[r])] \
                if processor.target_map is not None else str(int(target[r]))
        results[b].append(Explanation(target_name, float(at_input[r]), float(at_baseline[r]), float(deltas[r]),
                                      tokens, entity))
    return results


def _picked(values: Any, target: Any) -> Any:
    if target is None or values.dim() == 1:
        return values
    return values.gather(1, target.unsqueeze(1)).squeeze(1)


def _content_mask(ids: Any, processor: Any, specials: set[int]) -> Any:
    import torch  # lazy: x-pred imports this module at start, --dry included, which needs no torch

    content = ids.ne(processor.pad_index)
    for special in specials:
        content &= ids.ne(special)
    return content if content.dtype == torch.bool else content.bool()


def _text_tokens(processor: Any, sample: dict[str, Any], texts: list[str] | None, per_token: dict[str, Any],
                 row: int, names: list[str], specials: set[int]) -> list[list[tuple[str, float]]]:
    """Per text of the sample: (word, score), the pieces merged back."""
    out = []
    for name in names:
        ids = [int(i) for i in sample[name]]
        for run in text_runs(ids, len(ids), specials):
            k = len(out)
            content = [ids[p] for p in run]
            scores = [float(per_token[name][row, p]) for p in run]
            words = text_words(processor, texts[k], content) if texts is not None and k < len(texts) else None
            out.append(merged(words if words is not None else piece_words(processor.dictionary.string(content)),
                              scores))
    return out


def _unit_tokens(processor: Any, sample: dict[str, Any], per_token: dict[str, Any], row: int, names: list[str],
                 specials: set[int]) -> list[list[tuple[str, float]]]:
    """NER: (unit, score) for each unit of the text (a character or a word), its pieces summed."""
    name = names[0]
    ids = [int(i) for i in sample[name]]
    starts = [int(s) for s in sample["word_starts"]] if "word_starts" in sample else [1] * len(ids)
    run = text_runs(ids, len(ids), specials)[0]
    text, offsets = sample.get("text"), sample.get("offsets")
    pieces = processor.dictionary.string(ids)
    units: list[tuple[str, float]] = []
    for p in run:
        score = float(per_token[name][row, p])
        if starts[p] or not units:
            u = len(units)
            word = text[offsets[u][0]: offsets[u][1]] if text is not None and offsets is not None else pieces[p]
            units.append((word, score))
        else:
            units[-1] = (units[-1][0], units[-1][1] + score)
    return [units]


def _entity(sample: dict[str, Any], begin: int, end: int, kind: str) -> dict[str, Any]:
    text, offsets = sample.get("text"), sample.get("offsets")
    if text is not None and offsets is not None:
        start, stop = offsets[begin][0], offsets[end - 1][1]
        return {"text": text[start:stop], "type": kind, "start": int(start), "end": int(stop)}
    return {"type": kind, "start": begin, "end": end}
