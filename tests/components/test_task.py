"""The default task: builds model and loss from args; steps return the summed loss and outputs."""

from __future__ import annotations

import torch

from tests.components.helpers import make_args
from xdpx.tasks import tasks


def batch() -> dict:
    tokens1, tokens2 = torch.randint(1, 50, (4, 6)), torch.randint(1, 50, (4, 5))
    return {"net_input": {"tokens1": tokens1, "tokens2": tokens2}, "target": torch.tensor([0, 1, 2, 1]),
            "id": torch.arange(4), "nsamples": 4, "ntokens": 44}


def test_train_step_returns_a_differentiable_sum_and_valid_step_the_outputs():
    torch.manual_seed(0)
    task = tasks.get("default")(make_args(model="match_cnn", embedding_dim=8, hidden_size=8))
    model = task.build_model()
    data = batch()
    loss_sum, sample_size, logs = task.train_step(model, data)
    assert loss_sum.requires_grad and sample_size == 4 and "logits" not in logs
    loss_sum.backward()
    assert model.embedding.embedding.weight.grad is not None
    model.eval()
    valid_sum, _, valid_logs = task.valid_step(model, data)
    assert not valid_sum.requires_grad and valid_logs["logits"].shape == (4, 3)
    torch.testing.assert_close(task.inference_step(model, data), valid_logs["logits"])
    metrics = task.compute_metrics(valid_logs["logits"], valid_logs["target"])
    assert 0.0 <= metrics["accuracy"] <= 1.0 and "macro_f1" in metrics


def test_same_seed_builds_the_same_model():
    args = make_args(model="re2", embedding_dim=8, hidden_size=8)
    task = tasks.get("default")(args)
    torch.manual_seed(3)
    first = task.build_model().state_dict()
    torch.manual_seed(3)
    second = task.build_model().state_dict()
    assert all(torch.equal(first[k], second[k]) for k in first)
