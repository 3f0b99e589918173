"""Shared test helpers: resolve a component config the way x-train does, against stand-in meta options."""

from __future__ import annotations

from typing import Any

from xdpx.config.options import Args, Option, resolve
from xdpx.losses import losses
from xdpx.models import models
from xdpx.optim import lr_schedulers, optimizers
from xdpx.tasks import tasks

# What meta.hjson and the trainer declare in the real roots (xdpx.data.meta, xdpx.train.options).
STAND_IN_ROOT = [
    Option("vocab_size", int, default=50),
    Option("pad_index", int, default=0),
    Option("num_classes", int, default=3),
    Option("target_type", str, default="text"),
    Option("special_targets", list[str], default=[]),
    Option("learning_rate", float, default=1e-3),
    Option("major_metric", str, default="accuracy"),
    Option("task", str, default="default", registry=tasks),
    Option("model", str, default="cls_cnn", registry=models),
    Option("loss", str, default="cross_entropy", registry=losses),
    Option("optimizer", str, default="adam", registry=optimizers),
    Option("lr_scheduler", str, default="constant", registry=lr_schedulers),
]


def make_args(**config: Any) -> Args:
    return resolve(config, STAND_IN_ROOT, "test")
