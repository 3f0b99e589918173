"""gradient_checkpointing: the same loss and gradients (dropout on), less memory kept for backward."""

from __future__ import annotations

import torch

from tests.bert.bert_helpers import batch, build

# dropout on: the recomputation must draw the same masks as the first forward pass
CONFIG = {"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "num_hidden_layers": 3}


def loss_and_gradients(checkpointing: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor], int]:
    """(loss, gradients, bytes of the tensors autograd keeps for backward outside checkpointed layers)."""
    model = build(seed=0, gradient_checkpointing=checkpointing, **CONFIG).train()
    inputs = batch(lengths=(30, 17, 41, 8, 25, 41))
    target = torch.tensor([0, 1, 2, 1, 0, 2])
    kept = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        kept.append(tensor.numel() * tensor.element_size())
        return tensor

    torch.manual_seed(7)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        loss = torch.nn.functional.cross_entropy(model(**inputs), target)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}, sum(kept)


def test_gradient_checkpointing_gives_the_same_loss_and_gradients_with_less_memory():
    loss, grads, kept = loss_and_gradients(False)
    loss_ckpt, grads_ckpt, kept_ckpt = loss_and_gradients(True)
    torch.testing.assert_close(loss_ckpt, loss, rtol=1e-6, atol=1e-7)
    assert grads.keys() == grads_ckpt.keys()
    for name in grads:
        torch.testing.assert_close(grads_ckpt[name], grads[name], rtol=1e-5, atol=1e-7, msg=name)
    assert kept_ckpt < kept / 3, (kept_ckpt, kept)  # 3 layers: only their inputs stay alive

