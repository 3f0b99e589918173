"""The evaluation x-train and x-eval share, and batched prediction for x-pred and x-serve.

:func:`evaluate` is the only code that turns a model and a dataset into loss and metrics: the trainer's
evaluation (valid.log.tsv) calls it and so does x-eval, so the same checkpoint on the same split gives
the same numbers in both. Batches are cut from the samples sorted by length (stable), collated by the
run's processor and run through ``task.valid_step`` under the run's autocast context; the metrics come
from ``task.compute_metrics`` on the concatenated outputs of the whole evaluation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from xdpx.runtime import distributed
from xdpx.runtime.out_of_memory import is_out_of_memory
from xdpx.utils.step_progress import StepProgress


def _identity(batch: dict[str, Any]) -> dict[str, Any]:
    return batch


def length_order(sizes: Any) -> np.ndarray:
    """Sample indices by length (ties in their order): little padding in each batch."""
    return np.argsort(np.asarray(sizes), kind="stable")


def evaluate(task: Any, model: torch.nn.Module, processor: Any, data: Any, batch_size: int, autocast: Any,
             to_device: Callable[[dict[str, Any]], dict[str, Any]] = _identity,
             max_steps: int | None = None, context: Any = None, progress: str | None = None,
             outputs_to: list[tuple[torch.Tensor, torch.Tensor]] | None = None) -> dict[str, float]:
    """``{'loss': ..., metric: ...}`` of ``model`` on ``data`` (``len``, ``[i]``, ``sizes``; labelled).

    Sets ``model.eval()``; the caller restores training mode if it needs it. ``max_steps`` stops after
    that many batches (of the length-sorted order, so the shortest samples). With a distributed
    ``context`` (xdpx.runtime.distributed.Context) each rank scores every world_size-th batch of the same
    batches one process would make (no sample twice, no padding), the outputs are gathered in batch
    order and every rank returns the one-process numbers. ``progress`` names the step for a progress bar
    or line on rank 0 (xdpx.utils.step_progress; x-eval passes one, x-train's evaluations do not).
    ``outputs_to``: a list that receives the concatenated ``(logits, targets)`` (x-eval's calibration figures).
    """
    model.eval()
    order = length_order(data.sizes)
    starts = list(range(0, len(order), batch_size))[:max_steps]
    rank, world_size = (context.rank, context.world_size) if context is not None else (0, 1)

    def score_share() -> list[tuple[int, float, int, torch.Tensor, torch.Tensor]]:
        outputs = []
        numbers = range(rank, len(starts), world_size)
        with StepProgress(len(numbers), progress or "", enabled=bool(progress) and rank == 0) as shown:
            for number in numbers:
                start = starts[number]
                batch = processor.collate([data[int(j)] for j in order[start: start + batch_size]])
                with autocast:
                    _loss, size, logs = task.valid_step(model, to_device(batch))
                outputs.append((number, float(logs["loss"]), size, logs["logits"].float().cpu(),
                                logs["target"].cpu()))
                shown.update()
        return outputs

    outputs = gather_shares(score_share, context)
    loss_sum, sample_size = 0.0, 0
    for _, loss, size, _, _ in outputs:  # summed in batch order: the same float sum as one process
        loss_sum += loss
        sample_size += size
    metrics = {"loss": loss_sum / max(sample_size, 1)}
    logits, targets = torch.cat([o[3] for o in outputs]), torch.cat([o[4] for o in outputs])
    metrics.update(task.compute_metrics(logits, targets))
    if outputs_to is not None:
        outputs_to.append((logits, targets))
    return metrics


def gather_shares(score_share: Callable[[], list[tuple]], context: Any) -> list[tuple]:
    """Every rank's ``score_share()`` rows ``(batch number, ...)``, gathered and sorted by batch number.

    Out-of-memory on any rank is raised on every rank (after the gather, so no rank is left waiting),
    which lets auto_ga halve the batch everywhere and start the evaluation again together.
    """
    if context is None or not context.distributed:
        return score_share()
    try:
        mine: Any = score_share()
    except Exception as error:
        if not is_out_of_memory(error):
            raise
        mine = f"out of memory on rank {context.rank}: {error}"
    shares = distributed.all_gather_objects(mine, context)
    failed = [s for s in shares if isinstance(s, str)]
    if failed:
        raise torch.OutOfMemoryError(failed[0])
    return sorted((row for share in shares for row in share), key=lambda row: row[0])


def batch_starts(lengths: Sequence[int], batch_size: int, max_tokens: int | None = None) -> list[int]:
    """Where each batch begins in samples of these ``lengths`` (in order): every ``batch_size`` samples,
    and with ``max_tokens`` also before a sample that would make the padded batch (its count times its
    longest length) hold more tokens than that; a sample longer than max_tokens is a batch of its own."""
    if not max_tokens:
        return list(range(0, len(lengths), batch_size))
    starts: list[int] = []
    count = longest = 0
    for index, length in enumerate(lengths):
        longer = max(longest, int(length), 1)
        if starts and count < batch_size and (count + 1) * longer <= max_tokens:
            count, longest = count + 1, longer
        else:
            starts.append(index)
            count, longest = 1, max(int(length), 1)
    return starts


def concat_rows(outputs: Sequence[torch.Tensor], fill: float = -1) -> torch.Tensor:
    """Batches' outputs as one tensor of rows. An output whose dim 1 differs between batches (one value per
    token or unit, e.g. NER tags ``[B, U]``) is padded at the end of dim 1 with ``fill``."""
    if len(outputs) > 1 and outputs[0].dim() > 1 and len({o.shape[1:] for o in outputs}) > 1:
        width = max(o.size(1) for o in outputs)
        outputs = [torch.nn.functional.pad(o, (0, 0) * (o.dim() - 2) + (0, width - o.size(1)), value=fill)
                   for o in outputs]
    return torch.cat(list(outputs))


def predict_logits(task: Any, model: torch.nn.Module, processor: Any, samples: Sequence[dict[str, Any]],
                   batch_size: int, autocast: Any,
                   to_device: Callable[[dict[str, Any]], dict[str, Any]] = _identity,
                   context: Any = None, max_tokens: int | None = None, progress: str | None = None) -> torch.Tensor:
    """Logits (float32, on the CPU) of ``samples`` in their given order, computed in length-sorted batches
    of at most ``batch_size`` samples and, with ``max_tokens``, at most that many tokens with padding (with
    a distributed ``context``: each rank computes every world_size-th batch; every rank returns all).
    "Logits" are whatever ``task.inference_step`` returns; per-token outputs are padded (:func:`concat_rows`).
    ``progress`` names the step for a progress bar or line on rank 0 (xdpx.utils.step_progress)."""
    if not samples:
        return torch.zeros(0)
    fields = processor.fields
    # (a field a sample lacks counts 0: a bi-encoder embeds single texts, tokens1 without tokens2)
    order = length_order([sum(len(s[f]) for f in fields if f in s) for s in samples])
    # the padded length of a batch is that of its longest token field (without max_tokens only the count matters)
    lengths = [max(len(samples[int(j)][f]) for f in fields if f in samples[int(j)]) for j in order] \
        if max_tokens else order
    starts = batch_starts(lengths, batch_size, max_tokens)
    rank, world_size = (context.rank, context.world_size) if context is not None else (0, 1)

    def predict_share() -> list[tuple[int, torch.Tensor]]:
        outputs = []
        model.eval()
        numbers = range(rank, len(starts), world_size)
        shown = StepProgress(len(numbers), progress or "", enabled=bool(progress) and rank == 0)
        with shown, torch.inference_mode():  # no autograd bookkeeping at all: the outputs only become numbers
            for number in numbers:
                start, end = starts[number], starts[number + 1] if number + 1 < len(starts) else len(order)
                batch = processor.collate([samples[int(j)] for j in order[start: end]])
                with autocast:
                    outputs.append((number, task.inference_step(model, to_device(batch)).float().cpu()))
                shown.update()
        return outputs

    sorted_logits = concat_rows([logits for _, logits in gather_shares(predict_share, context)])
    logits = torch.empty_like(sorted_logits)
    logits[torch.from_numpy(order)] = sorted_logits
    return logits
