"""The figures a run draws while it trains, on the main process after an evaluation: x-viz's plots of
its logs (xdpx/viz, with ``viz``) and the gradient inspector's (``inspect_gradient``). A drawing that fails
is logged and training goes on; matplotlib is imported only when a figure is drawn.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import torch

from xdpx import io
from xdpx.debug import gradient_stats, plot_gradients
from xdpx.viz import plot_run

if TYPE_CHECKING:
    from xdpx.train.loop import Trainer


def normalised_gradient_stats(module: torch.nn.Module, grads: list[torch.Tensor], factor: float) -> Any:
    """inspect_gradient: ``grads`` multiplied by ``factor`` in place, then |grad| per parameter."""
    torch._foreach_mul_(grads, factor)  # the statistics are of the normalised gradients
    return gradient_stats(module.named_parameters())


def draw(trainer: Trainer, final: bool) -> None:
    """The run's figures (x-viz) and the gradient inspector's, on the main process; a failure is
    logged and training goes on."""
    a = trainer.args
    if not trainer.context.is_main:
        return
    if trainer.gradient_stats is not None:
        step, stats = trainer.gradient_stats
        trainer.gradient_stats = None
        draw_gradients(stats, step, trainer.save_dir, trainer.log.info)
    if not a.viz:
        return
    # after an evaluation when viz_min_interval seconds passed since the last drawing; at the end when
    # the run trained that long (a run of a few seconds is not worth the drawing time: x-viz draws it)
    last = final or trainer._stop_reason() is not None
    due = time.perf_counter() - trainer.last_plot >= a.viz_min_interval
    if due or (last and trainer.time["total"] >= a.viz_min_interval):
        try:
            plot_run(trainer.save_dir)
        except Exception as error:
            trainer.log.info(f"viz: drawing the plots failed ({type(error).__name__}: {error}); "
                             "training goes on")
        trainer.last_plot = time.perf_counter()


def draw_gradients(stats: Any, step: int, save_dir: str, say: Any) -> None:
    """plots/gradients/<step>.png of the inspector's ``stats``; a failure is said and training goes on."""
    try:
        plot_gradients(stats, step, io.join(save_dir, "plots", "gradients", f"{step}.png"))
    except Exception as error:
        say(f"inspect_gradient: drawing failed ({type(error).__name__}: {error}); training goes on")
