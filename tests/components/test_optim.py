"""Optimizers (AdamW against torch, LAMB against the paper's update) and learning-rate curves."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from tests.components.helpers import make_args
from xdpx.optim import lr_schedulers, optimizers


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(3, 2)
        self.norm = torch.nn.LayerNorm(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.linear(x))


def train(model: torch.nn.Module, optimizer: torch.optim.Optimizer, steps: int = 3) -> None:
    torch.manual_seed(1)
    for _ in range(steps):
        optimizer.zero_grad()
        model(torch.randn(4, 3)).pow(2).sum().backward()
        optimizer.step()


def test_adam_is_torch_adamw_with_bias_and_layernorm_exempt_from_decay():
    args = make_args(optimizer="adam", weight_decay=0.1, learning_rate=0.01, adam_betas=[0.8, 0.99])
    ours, reference = Tiny(), Tiny()
    train(ours, optimizers.get("adam").build(args, ours))
    groups = [{"params": [reference.linear.weight], "weight_decay": 0.1},
              {"params": [reference.linear.bias, reference.norm.weight, reference.norm.bias], "weight_decay": 0.0}]
    train(reference, torch.optim.AdamW(groups, lr=0.01, betas=(0.8, 0.99), eps=1e-6))
    for a, b in zip(ours.parameters(), reference.parameters()):
        torch.testing.assert_close(a, b)


def test_adam_implementations_foreach_is_bitwise_the_loop_and_fused_agrees_to_rounding():
    trained = {}
    for implementation in ("for_loop", "foreach", "fused"):
        args = make_args(optimizer="adam", weight_decay=0.1, learning_rate=0.01, adam_implementation=implementation)
        model = Tiny()
        optimizer = optimizers.get("adam").build(args, model)
        group = optimizer.param_groups[0]
        assert (bool(group["fused"]), bool(group["foreach"])) == {"fused": (True, False), "foreach": (False, True),
                                                                  "for_loop": (False, False)}[implementation]
        train(model, optimizer, steps=5)
        trained[implementation] = [p.detach().clone() for p in model.parameters()]
    for a, b in zip(trained["for_loop"], trained["foreach"]):
        assert torch.equal(a, b)
    for a, b in zip(trained["for_loop"], trained["fused"]):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


def test_fused_adam_resumes_bit_for_bit_and_keeps_its_implementation():
    args = make_args(optimizer="adam", weight_decay=0.1, learning_rate=0.01)
    straight = Tiny()
    train(straight, optimizers.get("adam").build(args, straight), steps=4)
    first = Tiny()
    optimizer = optimizers.get("adam").build(args, first)
    train(first, optimizer, steps=2)
    state = copy.deepcopy(optimizer.state_dict())
    resumed = Tiny()
    resumed.load_state_dict(first.state_dict())
    old = optimizers.get("adam").build(make_args(optimizer="adam", weight_decay=0.1, learning_rate=0.01,
                                                 adam_implementation="for_loop"), resumed)
    old.load_state_dict(state)  # the saved flags win: a resumed run keeps the kernels it started with
    assert old.param_groups[0]["fused"] is True
    torch.manual_seed(1)
    for _ in range(2):  # the same two batches as steps 3 and 4 of the straight run
        torch.randn(4, 3)
    for _ in range(2):
        old.zero_grad()
        resumed(torch.randn(4, 3)).pow(2).sum().backward()
        old.step()
    for a, b in zip(straight.parameters(), resumed.parameters()):
        assert torch.equal(a, b)


def test_decay_alone_shrinks_only_the_matrices():
    args = make_args(optimizer="adam", weight_decay=0.5, learning_rate=0.1)
    model = Tiny()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = optimizers.get("adam").build(args, model)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    torch.testing.assert_close(model.linear.weight, before["linear.weight"] * (1 - 0.1 * 0.5))
    torch.testing.assert_close(model.linear.bias, before["linear.bias"])
    torch.testing.assert_close(model.norm.weight, before["norm.weight"])


def test_sgd_momentum():
    model = torch.nn.Linear(1, 1, bias=False)
    torch.nn.init.constant_(model.weight, 1.0)
    optimizer = optimizers.get("sgd").build(make_args(optimizer="sgd", momentum=0.5, learning_rate=0.1), model)
    for _ in range(2):
        model.weight.grad = torch.ones_like(model.weight)
        optimizer.step()
    # velocity 1, then 0.5 * 1 + 1 = 1.5: weight 1 - 0.1 - 0.15
    assert model.weight.item() == pytest.approx(0.75)


def test_lamb_one_step_matches_the_paper():
    lr, eps, decay = 0.01, 1e-6, 0.1
    args = make_args(optimizer="lamb", learning_rate=lr, weight_decay=decay)
    model = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[3.0, 4.0]]))
    optimizer = optimizers.get("lamb").build(args, model)
    model.weight.grad = torch.tensor([[1.0, -2.0]])
    optimizer.step()
    # step 1: bias-corrected m = g, v = g^2, so r = g / (|g| + eps)
    r = [1.0 / (1.0 + eps), -2.0 / (2.0 + eps)]
    u = [r[0] + decay * 3.0, r[1] + decay * 4.0]
    trust = 5.0 / math.sqrt(u[0] ** 2 + u[1] ** 2)
    expected = [3.0 - lr * trust * u[0], 4.0 - lr * trust * u[1]]
    assert model.weight.detach().flatten().tolist() == pytest.approx(expected, rel=1e-6)


def test_lamb_state_round_trips():
    model = Tiny()
    optimizer = optimizers.get("lamb").build(make_args(optimizer="lamb"), model)
    train(model, optimizer, steps=2)
    clone = Tiny()
    clone.load_state_dict(model.state_dict())
    restored = optimizers.get("lamb").build(make_args(optimizer="lamb"), clone)
    # A copy, as from a checkpoint file: load_state_dict keeps the very tensors it is given.
    restored.load_state_dict(copy.deepcopy(optimizer.state_dict()))
    train(model, optimizer, steps=1)
    train(clone, restored, steps=1)
    for a, b in zip(model.parameters(), clone.parameters()):
        assert torch.equal(a, b)


def schedule(name: str, total: int = 100, **config: object):
    return lr_schedulers.get(name)(make_args(lr_scheduler=name, learning_rate=1.0, **config), total)


def test_constant_and_warmup_constant():
    assert [schedule("constant").lr(n) for n in (0, 50, 99)] == [1.0, 1.0, 1.0]
    warm = schedule("warmup_constant", warmup_steps=10)
    assert [warm.lr(n) for n in (0, 4, 9, 10, 99)] == pytest.approx([0.1, 0.5, 1.0, 1.0, 1.0])


def test_linear_decay_with_warmup_steps_or_ratio():
    by_steps, by_ratio = schedule("linear_decay", warmup_steps=10), schedule("linear_decay", warmup_steps=0.1)
    for s in (by_steps, by_ratio):
        assert [s.lr(n) for n in (0, 9, 10, 55, 99, 100)] == pytest.approx([0.1, 1.0, 1.0, 0.5, 1 / 90, 0.0])


def test_exponential_decay_is_a_staircase_after_warmup():
    s = schedule("exponential_decay", warmup_steps=10, decay_rate=0.5, decay_steps=20, div_factor=10.0)
    assert [s.lr(n) for n in (0, 5, 10, 29, 30, 50)] == pytest.approx([0.1, 0.55, 1.0, 1.0, 0.5, 0.25])


@pytest.mark.parametrize("strategy, middle", [("linear", 0.5 + 0.5 / 100), ("cosine", 0.5 + 0.5 / 100),
                                              ("polynomial", 0.25 + 0.75 / 100)])
def test_one_cycle_rises_then_anneals_back(strategy, middle):
    extra = {"anneal_p": 2.0} if strategy == "polynomial" else {}
    s = schedule("one_cycle", total=110, warmup_steps=10, anneal_strategy=strategy, div_factor=100.0, **extra)
    assert s.lr(0) == pytest.approx(0.01) and s.lr(10) == pytest.approx(1.0)
    assert s.lr(60) == pytest.approx(middle)  # halfway down the anneal
    assert s.lr(110) == pytest.approx(0.01) and s.lr(500) == pytest.approx(0.01)


def test_schedules_are_pure_and_set_every_group():
    s = schedule("linear_decay", warmup_steps=5)
    assert s.lr(42) == s.lr(42) and s.state_dict() == {}
    model = Tiny()
    optimizer = optimizers.get("adam").build(make_args(weight_decay=0.1), model)
    assert s.step_update(optimizer, 3) == pytest.approx(0.8)
    assert [g["lr"] for g in optimizer.param_groups] == pytest.approx([0.8, 0.8])
