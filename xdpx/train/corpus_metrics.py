"""Corpus metrics in x-train's evaluations (option ``eval_corpus``): a bi-encoder run names a BEIR-format
folder (xdpx/data/beir.py; a folder reads ``qrels/test.tsv``, a path ``<folder>/qrels/<split>.tsv`` picks the
split) and every evaluation embeds its corpus and judged queries with the model being trained and logs
NDCG, MAP, MRR, recall and precision at each k of ``recall_at`` as ``corpus.<metric>_at_<k>`` columns of
valid.log.tsv, beside the in-batch metrics of the first valid split (``major_metric: corpus.ndcg_at_10``
can pick the best checkpoint and drive early stopping).

The numbers come from the function x-eval uses for a BEIR folder (xdpx/runtime/corpus.py,
:func:`evaluate_corpus`) with the batch size x-eval uses (valid_batch_size), so x-eval of a checkpoint with
the folder as its valid_subset reports the very values of that checkpoint's row. The folder is read and
checked once by x-train's preflight (``--dry`` too): a bad file is one line naming file and line, exit 2,
before anything is written. Embedding draws no random number: a resumed run logs the same values.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from xdpx.config.errors import ConfigError
from xdpx.data.beir import read_beir
from xdpx.metrics.ir import CORPUS_PREFIX
from xdpx.models.choice import head_name, model_label
from xdpx.runtime.corpus import corpus_location, evaluate_corpus


def read_eval_corpus(args: Any) -> Any:
    """The BeirSet of ``eval_corpus`` (None without it); ConfigError naming the key for a path that is not a
    BEIR folder or its qrels file, or a run that is not a bi-encoder; BeirError for a bad file."""
    name = args.get("eval_corpus")
    if not name:
        return None
    where = f"{args.source('eval_corpus')}: key 'eval_corpus'"
    if head_name(args) != "bi_encoder":
        raise ConfigError(f"{where}: a retrieval corpus scores a bi-encoder's embeddings, and this run is a "
                          f"{model_label(args)}: set eval_corpus: null")
    if not args.valid_subset:
        raise ConfigError(f"{where}: the corpus metrics are columns of the evaluations, and valid_subset is null: "
                          "name a valid split (dev)")
    location = corpus_location(str(name))
    if location is None:
        raise ConfigError(f"{where}: {name!r} is not a BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv) "
                          "nor a qrels/<split>.tsv inside one")
    return read_beir(*location)


def corpus_problems(args: Any) -> list[str]:
    """x-train's preflight: the one line of a bad ``eval_corpus`` (empty when fine or unset)."""
    try:
        read_eval_corpus(args)
    except ConfigError as e:
        return [str(e)]
    return []


def corpus_columns(trainer: Any, data: Any) -> dict[str, float]:
    """``corpus.<metric>`` of the trainer's model (its evaluated weights: the caller's context) on ``data``."""
    # lazy: torch; x-train's preflight (--dry) reads this module
    from xdpx.train.fsdp import is_sharded

    t = trainer
    loaded = SimpleNamespace(task=t.task, model=t.module, processor=t.processor, batch_size=t.valid_batch_size,
                             autocast=t.autocast, to_device=t._to_device, run_args=t.args)
    # a sharded model (fsdp) must run the same batches on every process: each embeds everything
    context = None if is_sharded(t.module) else t.context
    try:
        metrics = evaluate_corpus(loaded, data, list(t.args.get("recall_at") or [1, 10]), context)
    finally:
        t.module.train()
    return {CORPUS_PREFIX + name: value for name, value in metrics.items()}
