"""``ema_decay``: an exponential moving average of the weights, evaluated and saved in their place.

After every optimizer update ``average = decay * average + (1 - decay) * weight`` for each trainable
parameter, starting from the weights the run starts with (after pretrained_model). Evaluations score the
averaged weights and checkpoint-<step>.pt holds them (with the model's buffers, e.g. BatchNorm statistics,
as training left them), so valid.log.tsv, ``<best>``, x-eval, x-pred and the exports all see the average;
state.pt keeps the training weights and the average apart, so a resumed run continues both exactly.

A plain copy of the parameters rather than ``torch.optim.swa_utils.AveragedModel``: AveragedModel
deep-copies the whole module (a second model to build, move and compile, and its ``module.`` key prefix
in every state_dict), while what must be saved, resumed and swapped in is just one tensor per parameter.
The update is ``lerp_``, the same arithmetic as swa_utils' ``get_ema_multi_avg_fn``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch


class WeightAverage:
    """The moving average of ``module``'s trainable parameters (``decay`` in [0, 1))."""

    def __init__(self, module: torch.nn.Module, decay: float) -> None:
        self.decay = decay
        self.average = {name: p.detach().clone() for name, p in module.named_parameters() if p.requires_grad}

    @torch.no_grad()
    def update(self, module: torch.nn.Module) -> None:
        """Fold the weights after an optimizer update into the average."""
        for name, p in module.named_parameters():
            if name in self.average:
                self.average[name].lerp_(p.detach(), 1.0 - self.decay)

    @contextlib.contextmanager
    def swapped_in(self, module: torch.nn.Module) -> Iterator[None]:
        """``module`` holds the averaged weights inside the block, its training weights again after it."""
        params = dict(module.named_parameters())
        kept = {name: params[name].detach().clone() for name in self.average}
        with torch.no_grad():
            for name, value in self.average.items():
                params[name].copy_(value)
        try:
            yield
        finally:
            with torch.no_grad():
                for name, value in kept.items():
                    params[name].copy_(value)

    def weights(self, module: torch.nn.Module) -> dict[str, torch.Tensor]:
        """``module.state_dict()`` with the averaged parameters (what checkpoint-<step>.pt holds); a
        parameter shared under several names (tied embeddings) gets its average under each of them."""
        state = module.state_dict()
        by_tensor = {id(p): name for name, p in module.named_parameters()}
        for name, p in module.named_parameters(remove_duplicate=False):
            first = by_tensor.get(id(p))
            if first in self.average and name in state:
                state[name] = self.average[first].clone()
        return state

    def state_dict(self) -> dict[str, Any]:
        return {"decay": self.decay, "average": {name: t.clone() for name, t in self.average.items()}}

    def load_state_dict(self, state: dict[str, Any] | None, say: Any) -> None:
        """Continue from a saved average; a state saved without one (ema_decay was off) starts the average
        from the restored weights, and says so."""
        if not state:
            say("ema_decay: the saved state holds no weight average (ema_decay was off): it starts from the "
                "resumed weights")
            return
        missing = set(self.average) - set(state["average"])
        if missing:
            raise ValueError(f"the saved weight average lacks {sorted(missing)[:3]}")
        for name in self.average:
            self.average[name].copy_(state["average"][name])


def weight_average(args: Any, module: torch.nn.Module, say: Any) -> WeightAverage | None:
    """The run's WeightAverage with ``ema_decay`` set (and below 1: 1 keeps the weights as they are,
    the original's way of saying off), else None."""
    decay = args.get("ema_decay")
    if decay is None or decay >= 1.0:
        return None
    say(f"ema_decay {decay}: evaluations and checkpoints use the moving average of the weights")
    return WeightAverage(module, decay)


def evaluated_weights(trainer: Any) -> contextlib.AbstractContextManager[None]:
    """The context an evaluation runs in: the averaged weights swapped in with ema_decay, else nothing."""
    ema = getattr(trainer, "ema", None)
    return ema.swapped_in(trainer.module) if ema is not None else contextlib.nullcontext()


def saved_weights(trainer: Any) -> dict[str, torch.Tensor]:
    """What a weights checkpoint holds: the averaged weights with ema_decay, else the model's."""
    ema = getattr(trainer, "ema", None)
    return ema.weights(trainer.module) if ema is not None else trainer.module.state_dict()
