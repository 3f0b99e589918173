"""Losses of the bi-encoders (models bi_encoder, bert_bi_encoder; their output is ``[B, K, D]``, the
embeddings of the K texts of each sample):

- ``info_nce``: in-batch negatives (DPR, SimCSE, sentence-transformers' MultipleNegativesRankingLoss):
  each query's positive is its own second text; every other second text of the micro-batch, and every
  hard negative (third text) of it, is a negative. Cross-entropy over the cosine similarities divided by
  ``temperature``. The negatives are those of one micro-batch on one process: update_freq and several
  processes make the update's sample count larger, not the pool of negatives (batch_size sets that), unless
  ``gather_negatives`` gathers every process's candidates under DDP (xdpx/losses/gather.py).
- ``cosine_similarity``: the cosine of the two texts regressed onto the score scaled to [0, 1] (score /
  ``score_scale``), mean squared error: sentence-transformers' CosineSimilarityLoss for STS data.

Both report the retrieval metrics of the dev set as its own candidate pool (recall_at_<k>, mrr) and, with
regression targets, pearson / spearman of the cosine (xdpx/metrics/retrieval.py). More losses build on
:class:`BiEncoderLoss`: cosent / angle (xdpx/losses/pair_scores.py), triplet / contrastive
(xdpx/losses/distances.py), margin_mse (xdpx/losses/margin_mse.py); every one takes the Matryoshka options
(xdpx/losses/matryoshka.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from xdpx.config.options import Option, Rule
from xdpx.config.ranges import above, at_least
from xdpx.losses import losses
from xdpx.losses.base import Loss, step_logs
from xdpx.losses.gather import gather_rows, world_size
from xdpx.losses.grad_cache import cached_embeddings
from xdpx.losses.matryoshka import MATRYOSHKA_OPTIONS, over_widths, widths
from xdpx.metrics.ir import corpus_metric_names
from xdpx.metrics.predictions import _numpy
from xdpx.models.choice import head_name

RECALL_AT = Option("recall_at", list[int], default=[1, 10], validate=at_least(1, min_items=1),
                   doc="the k of the recall_at_<k> metrics (the share of dev queries whose own positive is in "
                       "the top k of all dev candidates)")


def _major_metric_ok(args: Any) -> bool:
    names = {"mrr", "pearson", "spearman", *(f"recall_at_{k}" for k in args.get("recall_at") or [])}
    names |= corpus_metric_names(args)  # eval_corpus: corpus.ndcg_at_10 ...
    return args.major_metric == "loss" or args.major_metric in names | {
        f"{name}@{dim}" for name in names for dim, _ in widths(args)}


MAJOR_METRIC_RULE = Rule(_major_metric_ok, "major_metric is not reported with this loss; choose 'loss', mrr, "
                         "recall_at_<k> for a k of recall_at, or (with regression targets) pearson / spearman; "
                         "with matryoshka_dims also <metric>@<width>; with eval_corpus corpus.<ndcg|map|mrr|recall|"
                         "precision>_at_<k>", keys=("major_metric", "loss", "recall_at"))
BI_ENCODER_RULE = Rule(lambda a: head_name(a) == "bi_encoder" or a.get("user_dir") is not None,
                       "this loss scores a bi-encoder's embeddings: use head: bi_encoder on any encoder (or the "
                       "models bi_encoder / bert_bi_encoder), with processor bi_encoder / bert_bi_encoder",
                       keys=("loss", "model", "head"))


class BiEncoderLoss(Loss):
    """Shared: the forward pass, the logs (embeddings flattened to ``[B, K * D]`` as the 'logits' an
    evaluation concatenates), the metrics and the x-pred / x-serve output."""

    kinds = ("retrieval",)

    def scores(self, embeddings: torch.Tensor, target: torch.Tensor | None) -> torch.Tensor:
        """The loss summed over the batch from the embeddings ``[B, K, D]`` (float32)."""
        raise NotImplementedError

    def batch_loss(self, embeddings: torch.Tensor, target: torch.Tensor, batch: dict[str, Any]) -> torch.Tensor:
        """:meth:`scores`; a loss that reads more of the batch (margin_mse: the teacher's scores) overrides it."""
        return self.scores(embeddings, target)

    def __call__(self, model: nn.Module, batch: dict[str, Any],
                 keep_outputs: bool = False) -> tuple[torch.Tensor, int, dict[str, Any]]:
        chunk = self.args.get("mini_batch_size")  # gradient caching (xdpx/losses/grad_cache.py), info_nce's option
        embeddings = cached_embeddings(model, batch["net_input"], chunk) if chunk else model(**batch["net_input"])
        size = embeddings.size(0)
        target = batch.get("target")
        if target is None:  # pairs without a label column: the losses need none; metrics keep the shape
            target = torch.zeros(size, device=embeddings.device)
        loss_sum = over_widths(lambda e: self.batch_loss(e, target, batch), embeddings, self.args)
        outputs = (embeddings.detach().reshape(size, -1), target) if keep_outputs else None
        return loss_sum, size, step_logs(loss_sum, size, size, outputs)

    def compute_metrics(self, logits: torch.Tensor, targets: torch.Tensor) -> dict[str, float]:
        # lazy: the retrieval metrics only when an evaluation ends; x-train --dry loads every loss without them
        from xdpx.metrics.retrieval import retrieval_metrics

        num_texts = 3 if self.args.get("loader") == "triplet" else 2
        ks = list(self.args.recall_at)
        out = retrieval_metrics(logits, targets, num_texts, ks)
        for dim, _ in widths(self.args):  # each Matryoshka width: the cosines of the vectors cut to it
            cut = _numpy(logits).astype(np.float64).reshape(len(logits), num_texts, -1)[:, :, :dim]
            cut = (cut / np.maximum(np.linalg.norm(cut, axis=-1, keepdims=True), 1e-12)).reshape(len(logits), -1)
            out.update({f"{name}@{dim}": value for name, value in retrieval_metrics(cut, targets, num_texts, ks).items()})
        return out

    def prediction_format(self, args: Any, labels: list[str] | None) -> EmbeddingFormat:
        return EmbeddingFormat(3 if self.args.get("loader") == "triplet" else 2)


@losses.register("info_nce")
class InfoNCE(BiEncoderLoss):
    """In-batch negatives with a temperature (see the module docstring)."""

    options = [
        Option("temperature", float, default=0.05, validate=above(0),
               doc="divides the cosine similarities before the softmax (SimCSE: 0.05; sentence-transformers' "
                   "scale 20 is 0.05): smaller is sharper"),
        Option("symmetric", bool, default=False,
               doc="also score each positive against all queries of the batch (both directions averaged)"),
        Option("mini_batch_size", int, default=None, validate=at_least(1),
               doc="gradient caching (sentence-transformers' CachedMultipleNegativesRankingLoss): embed the batch "
                   "in chunks of this many samples, so batch_size sets the pool of in-batch negatives while "
                   "memory is that of one chunk; the loss and its gradient are the whole batch's (about 1/3 more "
                   "compute: each chunk runs twice). null: one pass over the batch"),
        Rule(lambda a: not (a.get("mini_batch_size") and a.get("fsdp")), "mini_batch_size (gradient caching) is "
             "built for one process or DDP; with fsdp set mini_batch_size: null", keys=("mini_batch_size", "fsdp")),
        Option("gather_negatives", bool, default=False,
               doc="under DDP, score each query against the candidates (positives and hard negatives) of every "
                   "process, gathered with their gradients (sentence-transformers' gather_across_devices): the "
                   "pool of in-batch negatives is the global batch, and the update is that of one process with "
                   "the whole batch. Training only (evaluation scores each process's batch); no effect with "
                   "one process"),
        Rule(lambda a: not a.get("gather_negatives") or (a.get("update_freq", 1) == 1 and not a.get("auto_ga")),
             "gather_negatives pairs each process's micro-batch with the other processes' and needs the same "
             "number on each: set update_freq: 1 and auto_ga: false (a larger batch_size with mini_batch_size "
             "keeps the memory of a small chunk)", keys=("gather_negatives", "update_freq", "auto_ga")),
        Rule(lambda a: not a.get("gather_negatives") or not (a.get("fsdp") or a.get("use_bmuf")),
             "gather_negatives is built for DDP (one process: no effect); with fsdp or use_bmuf set "
             "gather_negatives: false", keys=("gather_negatives", "fsdp", "use_bmuf")),
        RECALL_AT, MAJOR_METRIC_RULE, BI_ENCODER_RULE, *MATRYOSHKA_OPTIONS,
    ]

    def batch_loss(self, embeddings: torch.Tensor, target: torch.Tensor, batch: dict[str, Any]) -> torch.Tensor:
        if not (self.args.get("gather_negatives") and torch.is_grad_enabled() and world_size() > 1):
            return self.scores(embeddings, target)
        stand_in = bool(batch.get("stand_in"))  # the trainer's stand-in micro-batch: its text is another rank's
        everyone, offset = gather_rows(embeddings, contribute=not stand_in)
        if stand_in:  # no loss of its own, but its backward must join the other processes' gradient sum
            return (everyone.sum() + embeddings.sum()).float() * 0.0
        return self.scores(embeddings, target, everyone, offset)

    def scores(self, embeddings: torch.Tensor, target: torch.Tensor | None, everyone: torch.Tensor | None = None,
               offset: int = 0) -> torch.Tensor:
        """The loss of the queries of ``embeddings``; the candidates are those of ``everyone`` (every
        process's embeddings, this batch's at rows ``offset``...) when given, else this batch's."""
        if embeddings.size(1) < 2:
            raise ValueError("info_nce needs pairs: a second text per sample (loader pair or triplet)")
        vectors = F.normalize(embeddings.float(), dim=-1)  # float32: a bf16 softmax over the batch loses digits
        pool = vectors if everyone is None else F.normalize(everyone.float(), dim=-1)
        queries, positives = vectors[:, 0], vectors[:, 1]
        candidates = torch.cat([pool[:, 1], pool[:, 2]]) if pool.size(1) > 2 else pool[:, 1]
        labels = offset + torch.arange(queries.size(0), device=vectors.device)
        loss = F.cross_entropy(queries @ candidates.T / self.args.temperature, labels, reduction="sum")
        if self.args.symmetric:
            backward = F.cross_entropy(positives @ pool[:, 0].T / self.args.temperature, labels, reduction="sum")
            loss = (loss + backward) / 2
        return loss


@losses.register("cosine_similarity")
class CosineSimilarity(BiEncoderLoss):
    """(cos(a, b) - score / score_scale)^2, summed over the batch."""

    options = [
        Option("score_scale", float, default=5.0, validate=above(0),
               doc="the score that means 'the same meaning' (STS-B: 5): targets are divided by it"),
        RECALL_AT, MAJOR_METRIC_RULE, BI_ENCODER_RULE, *MATRYOSHKA_OPTIONS,
        Rule(lambda a: a.target_type == "regression", "cosine_similarity regresses onto scores: it needs "
             "target_type: regression (e.g. STS-B's 0-5 scores)", keys=("loss", "target_type")),
    ]

    def scores(self, embeddings: torch.Tensor, target: torch.Tensor | None) -> torch.Tensor:
        if embeddings.size(1) < 2:
            raise ValueError("cosine_similarity needs pairs: a second text per sample (loader pair)")
        vectors = embeddings.float()
        cosine = F.cosine_similarity(vectors[:, 0], vectors[:, 1], dim=-1)
        return F.mse_loss(cosine, target.float() / self.args.score_scale, reduction="sum")


def _number(x: float) -> str:
    return f"{float(x):.7g}"


class EmbeddingFormat:
    """x-pred / x-serve output of a bi-encoder. TSV: ``cosine`` (for pairs: the cosine of text 1 and 2) and
    ``embedding1`` (``embedding2``...), each embedding as space-separated numbers. numpy (binary: true):
    ``embeddings`` ``[N, D]`` for one text per input, ``[N, K, D]`` for K; ``cosine`` ``[N]`` for pairs.
    x-serve: ``{"embedding": [...]}`` per input (``embeddings`` and ``cosine`` for several texts)."""

    embeds = True  # x-serve answers POST /embed for such a run (xdpx/serve/embedding.py)

    def __init__(self, num_texts: int) -> None:
        self.num_texts = num_texts  # of x-pred's inputs: the run's loader reads them (pair: 2, triplet: 3)

    def names(self) -> list[str]:
        k = self.num_texts
        return (["cosine"] if k > 1 else []) + [f"embedding{i + 1}" for i in range(k)]

    @staticmethod
    def split(outputs: Any) -> Any:
        outputs = np.asarray(outputs, dtype=np.float32)
        return outputs if outputs.ndim == 3 else outputs.reshape(len(outputs), 1, -1)

    @staticmethod
    def cosine(vectors: Any) -> Any:
        a, b = vectors[:, 0].astype(np.float64), vectors[:, 1].astype(np.float64)
        return (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)

    def rows(self, outputs: Any, samples: list[dict[str, Any]] | None = None) -> list[list[str]]:
        vectors = self.split(outputs)
        cosine = self.cosine(vectors) if vectors.shape[1] > 1 else None
        return [([_number(cosine[i])] if cosine is not None else [])
                + [" ".join(_number(v) for v in vectors[i, k]) for k in range(vectors.shape[1])]
                for i in range(len(vectors))]

    def arrays(self, outputs: Any, numbers: list[int]) -> dict[str, Any]:
        vectors = self.split(outputs)
        out: dict[str, Any] = {"record": np.asarray(numbers, dtype=np.int64),
                               "embeddings": vectors[:, 0] if vectors.shape[1] == 1 else vectors}
        if vectors.shape[1] > 1:
            out["cosine"] = self.cosine(vectors).astype(np.float32)
        return out

    def records(self, outputs: Any, samples: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        vectors = self.split(outputs)
        if vectors.shape[1] == 1:
            return [{"embedding": [float(v) for v in row[0]]} for row in vectors]
        cosine = self.cosine(vectors)
        return [{"embeddings": [[float(v) for v in text] for text in row], "cosine": float(c)}
                for row, c in zip(vectors, cosine)]
