"""FreeLB adversarial training (Zhu et al., 2020): ``task: freelb``.

Each micro-batch runs ``adv_steps`` forward passes. The first adds a random perturbation ``delta`` to the
embedding output (``rand_init_mag``, zero on padding); after each pass ``delta`` climbs the gradient of
the loss (``adv_lr``, normalised by its ``norm_method``) and is projected back into ``max_norm``. The
losses of all passes, each divided by adv_steps, form the one loss the trainer backwards: parameters get
the average gradient over the perturbations (the "free" part), with one backward, so gradient
accumulation (update_freq), loss scaling and DDP work as for the default task.

Dropout masks are identical across the passes of a step: the RNG state is restored before each pass,
so the passes differ only by delta. Noise and dropout come from the trainer's per-update seed.

A model joins by being :class:`xdpx.models.parts.Perturbable`: its ``forward(**net_input, perturb=f)``
passes its input embeddings ``[B, T, H]`` and mask ``[B, T]`` through ``f``. Every encoder-and-head model
is (xdpx/models/composed.py); the whole pair-interaction models (re2, match_cnn) are not.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xdpx.config.options import Option
from xdpx.config.ranges import at_least
from xdpx.models.choice import model_label
from xdpx.models.parts import Perturbable
from xdpx.tasks import tasks
from xdpx.tasks.default import Task


class Perturbation:
    """delta for one pass: created at the first call (when the embedding shape is known) or given."""

    def __init__(self, task: FreeLB, delta: torch.Tensor | None) -> None:
        self.task, self.delta = task, delta

    def __call__(self, embeddings: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        if self.delta is None:
            self.delta = self.task.initial_delta(embeddings, attention_mask)
        self.delta.requires_grad_(True)
        self.mask = attention_mask
        return embeddings + self.delta.to(embeddings.dtype)


def _per_sample_norm(x: torch.Tensor) -> torch.Tensor:
    return x.flatten(1).norm(dim=1).view(-1, *([1] * (x.dim() - 1)))


@tasks.register("freelb")
class FreeLB(Task):
    """FreeLB: adversarial perturbations of the embedding output during training (evaluation is plain)."""

    options = [
        Option("adv_lr", float, default=0.1, validate=at_least(0),
               doc="step size of each ascent step on the perturbation"),
        Option("adv_steps", int, default=2, validate=at_least(1),
               doc="forward passes per micro-batch (ascent steps + 1); 1 is plain training plus the "
                   "random initial perturbation"),
        Option("rand_init_mag", float, default=0.0, validate=at_least(0),
               doc="magnitude of the random initial perturbation (l2: of its norm per sample, scaled by "
                   "sqrt(tokens x hidden); linf: of each element); 0 starts from zero"),
        Option("max_norm", float, default=0.0, validate=at_least(0),
               doc="largest perturbation (l2: norm per sample; linf: per element); 0: unbounded"),
        Option("norm_method", str, default="l2", choices=("l2", "linf"),
               doc="how the ascent step is normalised and the perturbation bounded"),
        Option("adv_begin_iter", int, default=0, validate=at_least(0),
               doc="plain training before this update; adversarial from it on"),
    ]

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.num_updates = 0

    def build_model(self) -> nn.Module:
        model = super().build_model()
        if not isinstance(model, Perturbable):
            raise ValueError(f"task freelb perturbs a model's input embeddings: every encoder + head model "
                             f"offers them (xdpx.models.parts.Perturbable); {model_label(self.args)} does not")
        return model

    def set_num_updates(self, num_updates: int) -> None:
        """The trainer says which update comes next (adv_begin_iter)."""
        self.num_updates = num_updates

    def initial_delta(self, embeddings: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        a = self.args
        mask = attention_mask.to(torch.float32).unsqueeze(-1)
        shape = embeddings.shape
        if a.rand_init_mag <= 0:
            return torch.zeros(shape, dtype=torch.float32, device=embeddings.device)
        noise = torch.empty(shape, dtype=torch.float32, device=embeddings.device)
        if a.norm_method == "l2":
            noise.uniform_(-1, 1)
            dims = mask.sum(dim=(1, 2), keepdim=True) * shape[-1]
            return noise * mask * (a.rand_init_mag / dims.clamp(min=1).sqrt())
        return noise.uniform_(-a.rand_init_mag, a.rand_init_mag) * mask

    def ascend(self, delta: torch.Tensor, grad: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """One ascent step on delta and the projection into max_norm (FreeLB's update rule)."""
        a = self.args
        mask = mask.to(torch.float32).unsqueeze(-1)
        grad = grad.float() * mask
        if a.norm_method == "l2":
            delta = delta + a.adv_lr * grad / _per_sample_norm(grad).clamp(min=1e-8)
            if a.max_norm > 0:
                norm = _per_sample_norm(delta)
                delta = delta * torch.where(norm > a.max_norm, a.max_norm / norm.clamp(min=1e-12), 1.0)
        else:
            delta = delta + a.adv_lr * grad / grad.abs().flatten(1).amax(1).clamp(min=1e-8).view(-1, 1, 1)
            if a.max_norm > 0:
                delta = delta.clamp(-a.max_norm, a.max_norm)
        return (delta * mask).detach()

    def train_step(self, model: nn.Module, batch: dict[str, Any]) -> tuple[torch.Tensor, int, dict[str, Any]]:
        a = self.args
        if self.num_updates < a.adv_begin_iter:
            return super().train_step(model, batch)
        cuda = torch.cuda.is_available() and any(p.is_cuda for p in model.parameters())
        cpu_state = torch.get_rng_state()
        cuda_state = torch.cuda.get_rng_state() if cuda else None
        delta: torch.Tensor | None = None
        total: torch.Tensor | None = None
        logged = 0.0
        for step in range(a.adv_steps):
            # the same dropout masks in every pass: only delta differs
            torch.set_rng_state(cpu_state)
            if cuda:
                torch.cuda.set_rng_state(cuda_state)
            perturbation = Perturbation(self, delta)

            def attacked(*args: Any, _p: Perturbation = perturbation, **kwargs: Any) -> Any:
                return model(*args, perturb=_p, **kwargs)

            loss, sample_size, logs = self.loss(attacked, batch)
            loss = loss / a.adv_steps
            total = loss if total is None else total + loss
            logged += float(logs["loss"]) / a.adv_steps
            if step < a.adv_steps - 1:
                grad, = torch.autograd.grad(loss, perturbation.delta, retain_graph=True)
                delta = self.ascend(perturbation.delta.detach(), grad, perturbation.mask)
        assert total is not None
        logs["loss"] = torch.tensor(logged, dtype=torch.float64)
        return total, sample_size, logs
