"""FreeLB: the same dropout masks in every adversarial pass, the perturbation rules, update_freq."""

from __future__ import annotations

import json

import pytest
import torch

from tests.bert.bert_helpers import batch, bert_args
from tests.bert.test_bert_training import COMMON, last_eval, weights
from xdpx.cli import run_chain


def _setup(**config):
    from xdpx.tasks import tasks

    args = bert_args(task="freelb", hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3, **config)
    task = tasks.get("freelb")(args)
    torch.manual_seed(0)
    model = task.build_model().train()
    inputs = batch()
    data = {"net_input": inputs, "target": torch.tensor([0, 1, 2, 1])}
    return task, model, data


def _grads(model):
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_zero_perturbation_equals_plain_training_with_dropout():
    """adv_lr 0 and no random init: every pass sees delta = 0, so if the dropout masks are the same in
    every pass, FreeLB's averaged loss and gradients equal one plain pass exactly."""
    task, model, data = _setup(adv_lr=0.0, adv_steps=3, rand_init_mag=0.0)
    torch.manual_seed(42)
    loss, size, logs = task.train_step(model, data)
    loss.backward()
    adversarial = _grads(model)
    model.zero_grad()
    torch.manual_seed(42)
    plain, plain_size, _ = task.loss(model, data)
    plain.backward()
    torch.testing.assert_close(loss, plain, rtol=1e-6, atol=1e-6)
    assert size == plain_size and float(logs["loss"]) == pytest.approx(float(plain.detach()))
    for name, grad in _grads(model).items():
        torch.testing.assert_close(adversarial[name], grad, rtol=1e-5, atol=1e-6)


def test_dropout_is_active_and_the_perturbation_changes_the_loss():
    task, model, data = _setup(adv_lr=0.0, adv_steps=1, rand_init_mag=0.0)
    torch.manual_seed(1)
    one = task.train_step(model, data)[0]
    torch.manual_seed(2)
    assert not torch.equal(one, task.train_step(model, data)[0])  # dropout differs between steps
    task, model, data = _setup(adv_lr=0.5, adv_steps=2, rand_init_mag=0.0)
    torch.manual_seed(1)
    attacked = task.train_step(model, data)[0]
    torch.manual_seed(1)
    clean = task.loss(model, data)[0]
    # the first pass is the clean one (delta 0, same dropout): the mean exceeds it only if the second,
    # perturbed pass has a higher loss: the ascent step climbs
    assert float(attacked.detach()) > float(clean.detach()) * 1.001


@pytest.mark.parametrize("norm_method", ["l2", "linf"])
def test_ascent_step_and_projection(norm_method):
    task, _, _ = _setup(adv_lr=0.1, max_norm=0.05, norm_method=norm_method)
    mask = torch.tensor([[1, 1, 1, 0]])
    grad = torch.randn(1, 4, 8)
    delta = task.ascend(torch.zeros(1, 4, 8), grad, mask)
    assert (delta[0, 3] == 0).all()  # never on padding
    if norm_method == "l2":
        assert float(delta.norm()) == pytest.approx(0.05, rel=1e-5)  # 0.1 step projected onto the 0.05 ball
    else:
        assert float(delta.abs().max()) == pytest.approx(0.05)
    init = _setup(rand_init_mag=1.0, norm_method=norm_method)[0].initial_delta(torch.zeros(2, 4, 8),
                                                                               torch.tensor([[1, 1, 0, 0]] * 2))
    assert (init[:, 2:] == 0).all() and init.abs().max() > 0


def test_a_model_without_the_split_is_refused():
    from tests.components.helpers import make_args
    from xdpx.tasks import tasks

    with pytest.raises(ValueError, match="perturbs a model's input embeddings.*re2 does not"):
        tasks.get("freelb")(make_args(task="freelb", model="re2")).build_model()


def test_freelb_with_update_freq_equals_one_big_batch(tmp_path, reviews_bert):
    """16 x 1 and 8 x 2 give the same weights (no dropout, no random init: nothing depends on the split)."""
    runs = {}
    for batch_size, update_freq in ((16, 1), (8, 2)):
        save_dir = tmp_path / f"b{batch_size}"
        path = tmp_path / f"b{batch_size}.hjson"
        path.write_text(json.dumps({
            "__parent__": "${data_dir}/meta", "data_dir": str(reviews_bert), "save_dir": str(save_dir),
            **COMMON, "model": "bert_classification", "loss": "cross_entropy", "major_metric": "accuracy",
            "task": "freelb", "adv_lr": 0.05, "adv_steps": 2, "adv_begin_iter": 1, "max_update": 3,
            "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
            "batch_size": batch_size, "update_freq": update_freq}))
        assert run_chain(["x-train", str(path)]) == 0
        runs[batch_size] = weights(save_dir)
        assert last_eval(save_dir)["step"] == "3"
    for key, value in runs[16].items():
        torch.testing.assert_close(runs[8][key], value, rtol=1e-4, atol=1e-5)
