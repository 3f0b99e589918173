"""``init_tables: true``: a SavedModel that takes raw text and does the run's tokenization and vocabulary
lookup itself, in TF ops, so a TF Serving client needs no tokenizer.

The word tokenizers that TF string ops can express exactly are written here: ``space`` (Python's
``str.split()``: runs of Unicode whitespace) and ``char_zh`` (its own regular expression, run by RE2 in
``tf.strings.regex_replace``); ``lower`` is ``tf.strings.lower(encoding='utf-8')`` (ICU: Python's
``str.lower`` but for 40 letters added in Unicode 14+). Ids come from a ``tf.lookup.StaticHashTable``
built from the run's vocab.txt (unknown words -> unk_index, a repeated entry keeps its first id, as
:class:`xdpx.data.dictionary.Dictionary`); each text is cut to ``max_len`` and the batch is padded with
pad_index. jieba (a dictionary and an HMM in Python) and the subword tokenizers (bert, auto) have no
TF form here: those runs export with ``init_tables: false`` and take token ids.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import numpy as np

from xdpx.data.tokenizing import _CHAR_ZH
from xdpx.errors import UserError
from xdpx.export.parity import ParityError
from xdpx.inference import probabilities

TEXT_TOKENIZERS = ("space", "char_zh")


@functools.lru_cache(maxsize=1)
def whitespace_class() -> str:
    """An RE2 class of the characters Python calls whitespace (``str.isspace``: what ``str.split()`` and
    ``\\s`` of ``re`` use); RE2's own ``\\s`` is ASCII only."""
    codes = [c for c in range(sys.maxunicode + 1) if chr(c).isspace()]
    return "".join(f"\\x{{{c:x}}}" for c in codes)


def check_text_tokenizer(args: Any) -> None:
    """A UserError when the run's tokenizer has no TF form (init_tables needs one)."""
    if args.tokenizer not in TEXT_TOKENIZERS:
        raise UserError(f"export_tf: init_tables: true needs the run's tokenizer in TF ops, and tokenizer "
                        f"{args.tokenizer!r} has none here (supported: {', '.join(TEXT_TOKENIZERS)}): set "
                        "init_tables: false; the SavedModel then takes token ids, which the run's processor "
                        "(or export_onnx's companions: vocab.txt, tokenizer.json) give")


def tokenize(tf: Any, texts: Any, tokenizer: str, lower: bool) -> Any:
    """``[B]`` strings -> a RaggedTensor of token strings, as the Python tokenizer of that name splits them."""
    if lower:
        texts = tf.strings.lower(texts, encoding="utf-8")
    if tokenizer == "char_zh":
        token = _CHAR_ZH.pattern.replace("\\S", f"[^{whitespace_class()}]")
        texts = tf.strings.regex_replace(texts, token, "\\0 ")  # every token followed by a space
    # runs of (Unicode) whitespace become one ASCII space, which tf.strings.split splits on
    texts = tf.strings.regex_replace(texts, f"[{whitespace_class()}]+", " ")
    return tf.strings.split(texts)


class TextEncoder:
    """Raw strings -> the padded int64 ids the run's processor gives (fields truncated to max_len)."""

    def __init__(self, tf: Any, processor: Any, args: Any, fix_len: int | None) -> None:
        check_text_tokenizer(args)
        self.tf, self.tokenizer, self.lower = tf, args.tokenizer, bool(args.get("lower", True))
        self.max_len, self.fix_len, self.pad_index = int(processor.max_len), fix_len, int(processor.pad_index)
        index = processor.dictionary.index  # token -> first id
        self.table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(list(index), tf.string),
                                                tf.constant(list(index.values()), tf.int64)),
            default_value=int(processor.dictionary.unk_index))

    def __call__(self, texts: Any) -> Any:
        tf = self.tf
        tokens = tokenize(tf, texts, self.tokenizer, self.lower)
        ids = tf.ragged.map_flat_values(self.table.lookup, tokens)[:, : self.max_len]
        if self.fix_len:
            return ids.to_tensor(default_value=self.pad_index, shape=[None, self.fix_len])
        dense = ids.to_tensor(default_value=self.pad_index)
        # at least one column: a batch of empty texts still has a length to pool over (all padding)
        return tf.pad(dense, [[0, 0], [0, tf.maximum(1 - tf.shape(dense)[1], 0)]], constant_values=self.pad_index)


def attach_text_serving(module: Any, processor: Any, args: Any, inputs: tuple[str, ...], labels: list[str] | None,
                        regression: bool, fix_len: int | None) -> Any:
    """Give ``module`` (one with ``logits(*ids)``) a tf.function taking raw strings (``text``, or ``text1``,
    ``text2`` for pairs) and returning ``logits`` and, as x-pred writes them, ``probabilities`` and
    ``label`` (classification) or ``score`` (regression)."""
    import tensorflow as tf  # lazy: optional tensorflow

    module.encoder = TextEncoder(tf, processor, args, fix_len)
    module.encoder_table = module.encoder.table  # tracked by the module, so the SavedModel keeps the table
    label_names = tf.constant(labels or [""], tf.string)

    def serve_text(*texts: Any) -> dict[str, Any]:
        logits = module.logits(*(module.encoder(t) for t in texts))
        if regression:
            return {"logits": logits, "score": logits}
        if logits.shape.rank == 1:  # one sigmoid logit: [1 - p, p] as x-pred's probabilities
            positive = tf.sigmoid(logits)
            probabilities = tf.stack([1.0 - positive, positive], axis=1)
        else:
            probabilities = tf.nn.softmax(logits, axis=-1)
        return {"logits": logits, "probabilities": probabilities,
                "label": tf.gather(label_names, tf.argmax(probabilities, axis=1))}

    names = ["text"] if len(inputs) == 1 else [f"text{i + 1}" for i in range(len(inputs))]
    spec = [tf.TensorSpec([None], tf.string, name=name) for name in names]
    module.text_serving = tf.function(serve_text, input_signature=spec, autograph=False)
    return names


def checking_texts(processor: Any, samples: list[dict[str, Any]], fields: tuple[str, ...]) -> list[list[str]]:
    """Texts for the raw-text check, rebuilt from real samples: their tokens joined by spaces (which the
    supported tokenizers split back into the same tokens), an unknown token written as a character that
    is not in the vocabulary, and one record made of every sample's text, longer than max_len."""
    dictionary = processor.dictionary
    unknown = next(chr(c) for c in range(0xE000, 0xF900) if chr(c) not in dictionary)  # private use area
    records = []
    for sample in samples:
        records.append([" ".join(unknown if i == dictionary.unk_index else dictionary.tokens[i]
                                 for i in np.asarray(sample[f]).tolist()) for f in fields])
    records.append([" ".join(r[k] for r in records) for k in range(len(fields))])
    return records


def check_text_savedmodel(serving: Any, run: Any, names: list[str], samples: list[dict[str, Any]],
                          fields: tuple[str, ...], regression: bool, atol: float) -> str:
    """The raw-text signature against what x-pred computes (processor.encode, the run's task) on the same
    texts, in one batch and one text alone; returns the description of the largest difference."""
    import tensorflow as tf  # lazy: optional tensorflow
    import torch  # lazy: loads torch

    records = checking_texts(run.processor, samples, fields)
    worst = 0.0
    for group in (records, records[-1:]):
        batch = run.processor.collate([run.processor.encode(r) for r in group])
        with torch.no_grad():
            want = np.asarray(run.task.inference_step(run.model, batch).float().numpy())
        out = serving(**{n: tf.constant([r[k] for r in group]) for k, n in enumerate(names)})
        expected = probabilities(want, regression)
        got = out["score"].numpy() if regression else out["probabilities"].numpy()
        for e, a in ((want, out["logits"].numpy()), (expected, got)):
            if e.shape != a.shape or not np.allclose(e, a, atol=atol, rtol=0):
                diff = float(np.max(np.abs(e - a))) if e.shape == a.shape else float("inf")
                raise ParityError(f"TF SavedModel (init_tables): outputs on raw texts differ from x-pred's by up to "
                                  f"{diff:.3g} (shapes {a.shape} / {e.shape}, tolerance {atol})")
            worst = max(worst, float(np.max(np.abs(e - a))))
        if not regression:
            labels = [s.decode() for s in out["label"].numpy().tolist()]
            if labels != [run.processor.target_map.labels[k] for k in expected.argmax(axis=1)]:
                raise ParityError("TF SavedModel (init_tables): predicted labels differ from x-pred's")
    return f"raw texts as x-pred: max |difference| {worst:.3g} over {len(records)} texts (one longer than max_len)"
