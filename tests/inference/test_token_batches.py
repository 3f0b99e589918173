"""Forward passes cut by a token budget (predict_logits ``max_tokens``, x-serve ``--max_tokens``): where
the batches begin, and the same predictions as without the budget, in fewer padded tokens."""

from __future__ import annotations

from pathlib import Path

import torch

from xdpx.runtime.scoring import batch_starts, predict_logits


def test_batch_starts_cut_at_the_budget_and_at_batch_size() -> None:
    lengths = [1, 2, 3, 10, 10, 40]
    assert batch_starts(lengths, 64) == [0]
    assert batch_starts(lengths, 2) == [0, 2, 4]
    # 3 samples of <= 3 tokens pad to 9; a 4th of 10 would make 40 > 20; two of 10 make 20; 40 alone
    assert batch_starts(lengths, 64, max_tokens=20) == [0, 3, 5]
    assert batch_starts(lengths, 2, max_tokens=20) == [0, 2, 4, 5]  # [1, 2] [3, 10] [10] [40]
    assert batch_starts([50, 60], 64, max_tokens=20) == [0, 1]  # longer than the budget: one per pass
    assert batch_starts([], 64, max_tokens=20) == []


def test_a_token_budget_gives_the_same_logits_in_less_padding(cnn_run: Path) -> None:
    from xdpx.serve.predictor import load_predictor

    predictor = load_predictor(str(cnn_run), cpu=True, batch_size=64)
    loaded = predictor.loaded
    lines = (Path(__file__).resolve().parents[2] / "examples/data/sample/reviews/dev.txt").read_text(
        encoding="utf-8").splitlines()
    samples = [predictor.encode(line) for line in lines]
    lengths = sorted(len(s["tokens"]) for s in samples)
    assert lengths[-1] > 3 * lengths[len(lengths) // 2], "the sample's lengths should vary"

    shapes: list[tuple[int, int]] = []
    step = loaded.task.inference_step

    def counting(model: torch.nn.Module, batch: dict) -> torch.Tensor:
        shapes.append(tuple(batch["net_input"]["tokens"].shape))
        return step(model, batch)

    loaded.task.inference_step = counting
    whole = predict_logits(loaded.task, loaded.model, loaded.processor, samples, 64, loaded.autocast)
    whole_shapes, shapes[:] = list(shapes), []
    budget = 4 * lengths[len(lengths) // 2]
    cut = predict_logits(loaded.task, loaded.model, loaded.processor, samples, 64, loaded.autocast,
                         max_tokens=budget)
    assert whole_shapes == [(len(samples), lengths[-1])]
    assert len(shapes) > 1 and sum(b for b, _ in shapes) == len(samples)
    assert all(b * t <= budget or b == 1 for b, t in shapes), shapes
    assert sum(b * t for b, t in shapes) < sum(b * t for b, t in whole_shapes) / 2
    assert torch.allclose(whole, cut, atol=1e-5), (whole - cut).abs().max()
