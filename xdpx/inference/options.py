"""Options shared by x-eval and x-pred: how the model is loaded and how raw data is read.

Names, types and defaults follow the original XDPX's manual's "验证/预测" section.
"""

from __future__ import annotations

from typing import Any

from xdpx import io
from xdpx.config.options import Option, Rule
from xdpx.config.ranges import at_least
from xdpx.data.errors import MAX_BAD_FRACTION
from xdpx.models.checkpoints import CheckpointError, resolve_checkpoint


def _cuda_available(_args: Any) -> bool:
    # lazy: loads torch
    import torch  # only when the default is computed: an explicit `cuda: false` never imports torch here

    return bool(torch.cuda.is_available())


# A run's args.py may name a user_dir: importing it runs its code here, so it needs the user's word.
TRUST_USER_DIR = Option(
    "trust_user_dir", bool, default=False,
    doc="import the user_dir that the run's args.py names (its code runs on this machine); without it (or your "
        "own user_dir) a run that names one is refused")

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
    Option("from_tf", bool, default=False,
           doc="checkpoint is TensorFlow's: a SavedModel folder that export_tf wrote, or (BERT runs) a TF BERT "
               "checkpoint (prefix such as .../bert_model.ckpt, or its folder); its weights are read into the run's "
               "model, every one of them by name, and the evaluation or prediction runs as usual (the run's "
               "processor, batching and metrics). Needs tensorflow-cpu"),
    Option("batch_size", int, default=None, validate=at_least(1),
           doc="samples per batch; null: the run's valid_batch_size"),
    Option("cuda", bool, default=_cuda_available, default_doc="torch.cuda.is_available()",
           doc="run on the GPU"),
    Option("seed", int, default=1, validate=at_least(0),
           doc="seed of the model's initialisation in config mode (and of torch)"),
    Option("compile", bool, default=False,
           doc="compile the model with torch.compile (inductor): pays on large inputs, costs a compilation "
               "per new batch shape first; without a C++ compiler a warning is logged and it runs eagerly"),
    TRUST_USER_DIR,
    Option("backend", str, default=None, choices=["torch", "onnx"],
           doc="what runs the forward passes of an int8 model of x-script quantize: torch (dynamic int8 Linear / "
               "LSTM layers) or onnx (its int8 ONNX model through onnxruntime); null: the faster one as quantize "
               "measured it. A run directory of x-train runs on torch"),
    Rule(lambda a: (a.save_dir is None) != (a.config is None),
         "set exactly one of save_dir (a run directory) and config (a training config)",
         keys=("save_dir", "config")),
    Rule(lambda a: not a.from_tf or a.checkpoint is not None,
         "from_tf: true reads the weights of checkpoint: set checkpoint to the SavedModel folder export_tf wrote "
         "(or a TF BERT checkpoint)", keys=("from_tf", "checkpoint")),
]

# x-eval and x-pred: the run's calibration.json (x-script calibrate; xdpx/inference/calibration.py)
CALIBRATED = Option(
    "calibrated", bool, default=True,
    doc="divide a classifier's logits by the temperature of the run's calibration.json (x-script calibrate) when "
        "it was fitted for the checkpoint loaded; false: the raw probabilities. The predicted labels are the same")
ECE_BINS = Option("ece_bins", int, default=15, validate=at_least(1),  # xdpx.metrics.calibration.DEFAULT_BINS
                  doc="equal-width confidence bins of the expected calibration error (ece) x-eval reports")

RAW_DATA_OPTIONS: list[Any] = [
    Option("workers", int, default=None, validate=at_least(1),
           doc="processes that parse and tokenize raw text files; null: one (in this process)"),
    Option("skip_bad_lines", bool, default=False, children={True: [MAX_BAD_FRACTION]},
           doc="skip malformed lines of raw inputs (counted and shown) instead of stopping at file:line"),
]


def read_paths(args: Any, key: str, names: list[str]) -> list[tuple[str, str]]:
    """(option, path) of what an x-eval / x-pred run reads besides its run: the checkpoint it loads and the
    files (or SQLite databases) ``names`` holds, so that no output replaces them (xdpx.io.ownership)."""
    found = []
    if args.checkpoint and args.get("from_tf"):
        found.append(("checkpoint", args.checkpoint))  # a SavedModel folder or a TF checkpoint prefix
    elif args.checkpoint:
        try:
            found.append(("checkpoint", resolve_checkpoint(args.checkpoint)))
        except CheckpointError:
            pass  # check_checkpoint says so, as a config error
    for name in names:
        path = name.partition("?")[0][len("sqlite:///"):] if name.startswith("sqlite:///") else name
        try:
            if io.isfile(path):
                found.append((key, name if path == name else path))
        except ValueError:  # a split name or an SQL URL of a server: nothing on disk to protect
            continue
    return found
