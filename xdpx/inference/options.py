"""Options shared by x-eval and x-pred: how the model is loaded and how raw data is read.

Names, types and defaults follow the seed manual's "验证/预测" section (from_tf arrives with BERT).
"""

from __future__ import annotations

from typing import Any

from xdpx.config.options import Option, Rule
from xdpx.data.errors import MAX_BAD_FRACTION


def _positive(value: int) -> bool:
    return value > 0


def _cuda_available(_args: Any) -> bool:
    import torch  # only when the default is computed: an explicit `cuda: false` never imports torch here

    return bool(torch.cuda.is_available())


LOAD_OPTIONS: list[Any] = [
    Option("save_dir", str, default=None, path="input",
           doc="a run directory of x-train (finished or running): the model, its options and its vocabulary "
               "come from there. Exclusive with config"),
    Option("config", str, default=None, path="input",
           doc="a training config (hjson): the model as that config initialises it (its pretrained_model, "
               "or a random baseline from seed). Exclusive with save_dir"),
    Option("extra_config", dict, default={},
           doc="options that override the run's own, e.g. another task or loss for evaluation "
               "({loss: label_smooth_ce}); checked like a training config"),
    Option("checkpoint", str, default=None,
           doc="weights to load: a full path, or ${save_dir}/<best> / ${save_dir}/<last>. Default: the best "
               "checkpoint in save_dir mode (the last one when the run saved no best), the initial weights "
               "in config mode"),
    Option("batch_size", int, default=None, validate=_positive, validate_msg="must be > 0",
           doc="samples per batch; null: the run's valid_batch_size"),
    Option("cuda", bool, default=_cuda_available, default_doc="torch.cuda.is_available()",
           doc="run on the GPU"),
    Option("seed", int, default=1, doc="seed of the model's initialisation in config mode (and of torch)"),
    Option("compile", bool, default=False,
           doc="compile the model with torch.compile (inductor): pays on large inputs, costs a compilation "
               "per new batch shape first; without a C++ compiler a warning is logged and it runs eagerly"),
    Rule(lambda a: (a.save_dir is None) != (a.config is None),
         "set exactly one of save_dir (a run directory) and config (a training config)",
         keys=("save_dir", "config")),
]

RAW_DATA_OPTIONS: list[Any] = [
    Option("workers", int, default=None, validate=_positive, validate_msg="must be > 0",
           doc="processes that parse and tokenize raw text files; null: one (in this process)"),
    Option("skip_bad_lines", bool, default=False, children={True: [MAX_BAD_FRACTION]},
           doc="skip malformed lines of raw inputs (counted and shown) instead of stopping at file:line"),
]
