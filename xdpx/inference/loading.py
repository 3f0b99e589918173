"""A model to evaluate or predict with, from a run directory or from a training config.

- ``save_dir`` mode: the run's options come from its args.py (read with ast.literal_eval), its vocabulary
  and target map from the copies x-train keeps in the run directory, its weights from ``checkpoint``
  (default: ``<best>``, else ``<last>``, else the latest full state).
- ``config`` mode: a training config, the model as it initialises it: seeded with ``seed``, then its
  ``pretrained_model`` loaded when it has one (or ``checkpoint`` when given).

``from_tf``: ``checkpoint`` is TensorFlow's (a SavedModel that export_tf wrote, or a TF BERT checkpoint);
its weights are read into the run's model by name, and the rest is as above.

``extra_config`` overrides the run's options and is checked against the training options like any
config (another loss or task for evaluation, say). Weight keys that are missing or unexpected are
reported: an error for a checkpoint of the run itself, a printed list for pretrained weights.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from xdpx import io
from xdpx.command import COMMON_OPTIONS, get_command
from xdpx.config.errors import ConfigError
from xdpx.config.loader import Config, load_config
from xdpx.config.options import Args, resolve, walk_options
from xdpx.config.writers import ARGS_FILE, read_args
from xdpx.data.composition import build_processor
from xdpx.data.processing import VOCAB_FILE
from xdpx.errors import UserError
from xdpx.models.checkpoints import BEST, LAST, CheckpointError, resolve_checkpoint, upgraded
from xdpx.models.checkpoints import load_weights_into as load
from xdpx.models.choice import model_label
from xdpx.registry import load_user_dir
from xdpx.runtime.run_files import STATE_FILE


def training_root() -> list[Any]:
    """The options x-train resolves against: what a run's args.py or a training config holds (x-train's
    own declaration, found through the command registry)."""
    return list(COMMON_OPTIONS) + get_command("x-train").options()


def run_options(args: Args) -> Args:
    """The run's own options (from save_dir/args.py or the training config) with extra_config applied."""
    if args.save_dir is not None:
        origin = io.join(args.save_dir, ARGS_FILE)
        if not io.exists(origin):
            raise ConfigError(f"{args.source('save_dir')}: key 'save_dir': {args.save_dir!r} has no {ARGS_FILE}: "
                              "it is not a run directory of x-train (for a training config use `config:`)")
        values = read_args(origin)
        sources = dict.fromkeys(values, origin)
    else:
        configs: list[Config] = load_config(args.config)
        if len(configs) != 1:
            raise ConfigError(f"{args.source('config')}: key 'config': {args.config} describes {len(configs)} runs "
                              "(a loop): give the config of a single run")
        values, sources, origin = dict(configs[0].values), dict(configs[0].sources), configs[0].file
    extra = dict(args.extra_config or {})
    where = f"{args.source('extra_config')} (extra_config)"
    sources.update(dict.fromkeys(extra, where))
    merged = {**values, **extra}
    folder = user_dir_to_import(args, values.get("user_dir"), extra, origin)
    if folder:
        try:
            load_user_dir(folder)
        except FileNotFoundError as e:  # a run trained on another machine, or a folder moved since
            raise UserError(f"{origin}: {e} on this machine: copy the run's components there, or give "
                            "user_dir: the folder of your copy") from None
    root = training_root()
    if args.save_dir is not None:
        # args.py lists the options of the components the run chose; once extra_config chooses another
        # (model, loss...), the old component's options are no longer active and are dropped.
        active = {option.name for option, _ in walk_options(root, "train", merged)}
        merged = {k: v for k, v in merged.items() if k in active or k in extra}
    return resolve(merged, root, "train", sources=sources, check_paths=False, origin=origin)


def user_dir_to_import(args: Args, recorded: str | None, extra: dict[str, Any], origin: str) -> str | None:
    """The user_dir whose components the run needs: the user's own (``user_dir`` of this config or of
    extra_config), else the one the run recorded, which needs the user's consent in save_dir mode: a run
    directory shared by someone else must not run code here unasked. A training config (config mode) is
    the user's own, as for x-train."""
    own = extra.get("user_dir") or args.get("user_dir")
    if own or not recorded:
        return own or None
    if args.save_dir is None or args.get("trust_user_dir"):
        return recorded
    folder = os.path.abspath(os.path.expanduser(recorded))
    raise UserError(f"{origin} names user_dir {folder!r}: importing it would run the code in that folder on this "
                    "machine, and code that comes with a run is not imported unasked. If you trust it, set "
                    "trust_user_dir: true in your config (x-serve: --trust-user-dir), or user_dir: your own copy")


@dataclass
class LoadedModel:
    """Everything inference needs: the run's options, task, model (eval mode, on its device), processor."""

    run_args: Args
    task: Any
    model: Any
    processor: Any
    device: Any
    autocast: Any
    batch_size: int
    checkpoint: str | None
    data_dir: str

    @property
    def regression(self) -> bool:
        from xdpx.models.modules.base import is_regression  # lazy: loads torch, numpy

        return is_regression(self.run_args)

    def to_device(self, batch: dict[str, Any]) -> dict[str, Any]:
        from xdpx.runtime.devices import batch_to_device  # lazy: keeps --help light

        return batch_to_device(batch, self.device)


def processor_dir(args: Args, run_args: Args) -> str:
    """Where vocab.txt / target_map.txt are read: the run directory's copies, else the run's data_dir."""
    if args.save_dir is not None and io.exists(io.join(args.save_dir, VOCAB_FILE)):
        return args.save_dir
    return run_args.data_dir


def is_tf_checkpoint(path: str) -> bool:
    """A SavedModel or TF checkpoint folder, or the prefix of TF checkpoint files (``prefix.index``)."""
    return io.isdir(path) or io.exists(f"{path}.index")


def check_checkpoint(args: Args) -> None:
    """A ``checkpoint`` given in the config must exist (a config error, found before any work)."""
    if args.checkpoint is None:
        return
    if args.get("from_tf"):
        if not is_tf_checkpoint(args.checkpoint):
            raise ConfigError(f"{args.source('checkpoint')}: key 'checkpoint': {args.checkpoint!r} is neither a folder "
                              "(a SavedModel of export_tf) nor a TF checkpoint prefix (no .index file), as from_tf: "
                              "true expects")
        return
    try:
        resolve_checkpoint(args.checkpoint)
    except CheckpointError as e:
        raise ConfigError(f"{args.source('checkpoint')}: key 'checkpoint': {e}") from None


def choose_checkpoint(args: Args, run_args: Args) -> tuple[str | None, bool]:
    """(weights to load or None, whether they are the run's own so every key must match)."""
    try:
        if args.checkpoint is not None:
            return resolve_checkpoint(args.checkpoint), args.save_dir is not None
        if args.save_dir is None:
            pretrained = run_args.get("pretrained_model")
            return (resolve_checkpoint(pretrained), False) if pretrained else (None, False)
    except CheckpointError as e:
        raise UserError(f"checkpoint: {e}") from None
    for alias in (BEST, LAST):
        try:
            return resolve_checkpoint(io.join(args.save_dir, alias)), True
        except CheckpointError:
            continue
    state = io.join(args.save_dir, STATE_FILE)
    if io.exists(state):
        return state, True
    raise UserError(f"{args.save_dir} holds no checkpoint and no {STATE_FILE} yet: wait for the run's first "
                    "evaluation, or give checkpoint: a path")


def load_tf_weights_into(model: Any, path: str, say: Any = print, label: str | None = None) -> None:
    """``from_tf``: the weights of a SavedModel that export_tf wrote (variables named as the state_dict) or
    of a TF BERT checkpoint (Google names, read into Hugging Face names), loaded by name into ``model``.
    Every parameter must come from the file with its shape; buffers the file lacks keep their values."""
    import torch  # lazy: loads torch

    from xdpx.models.tf_checkpoint import read_tf_bert_checkpoint  # lazy: loads numpy

    weights = upgraded(model, read_tf_bert_checkpoint(path))  # a SavedModel of cls_cnn... keeps earlier names
    state = model.state_dict()
    parameters = {name for name, _ in model.named_parameters(remove_duplicate=False)}
    missing = [k for k in state if k not in weights and k in parameters]
    unexpected = [k for k in weights if k not in state]
    wrong = [f"{k} {tuple(weights[k].shape)} (the model's: {tuple(state[k].shape)})" for k in state
             if k in weights and tuple(weights[k].shape) != tuple(state[k].shape)]
    if missing or wrong:
        raise UserError(f"checkpoint {path} (from_tf) does not hold the weights of model {label or type(model).__name__}: "
                        + (f"missing {missing[:5]}{' ...' if len(missing) > 5 else ''}; " if missing else "")
                        + (f"other shapes {wrong[:5]}; " if wrong else "")
                        + "from_tf reads the SavedModel export_tf wrote of this run (or for BERT a TF BERT checkpoint)")
    if unexpected:
        say(f"from_tf: {len(unexpected)} variable(s) of {path} that the model has not were left out: {unexpected[:5]}")
    model.load_state_dict({k: torch.from_numpy(weights[k].copy()) for k in state if k in weights}, strict=False)
    say(f"from_tf: {len([k for k in state if k in weights])} weights read from {path}")


def load_weights_into(model: Any, path: str, strict: bool, say: Any = print) -> None:
    """:func:`xdpx.models.checkpoints.load_weights_into` with the hint that fits x-eval / x-pred."""
    load(model, path, strict, say, hint=" Check extra_config and checkpoint")


def load_model(args: Args, run_args: Args | None = None, say: Any = print) -> LoadedModel:
    """Build the run's task, model and processor and load the weights ``args`` select."""
    import torch  # lazy: loads torch

    from xdpx.runtime.precision import autocast  # lazy: loads torch, numpy
    from xdpx.runtime.seeding import seed_everything  # lazy: loads torch, numpy

    run_args = run_args if run_args is not None else run_options(args)
    # lazy: an int8 folder of x-script quantize, or backend: onnx (xdpx/inference/backends.py imports this module)
    from xdpx.inference.backends import load_backend

    special = load_backend(args, run_args, say)
    if special is not None:
        return special
    if args.cuda and not torch.cuda.is_available():
        raise UserError("cuda: true but no GPU is available (torch.cuda.is_available() is False): set cuda: false")
    # under torchrun each process uses its own GPU (LOCAL_RANK)
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if args.cuda else torch.device("cpu")

    def component(key: str) -> Any:
        return run_args.option(key).registry.get(run_args.get(key))

    seed_everything(args.seed)
    task = component("task")(run_args)
    model = task.build_model()
    from_tf = bool(args.get("from_tf"))
    # from_tf weights are a plain model (export_tf folds LoRA adapters in): loaded like pretrained weights
    checkpoint, strict = (args.checkpoint, False) if from_tf else choose_checkpoint(args, run_args)
    if run_args.get("lora") is not None and strict:  # the run's own checkpoint holds the adapters: wrap as x-train did
        from xdpx.models.lora import add_lora  # lazy: loads torch, numpy

        add_lora(model, run_args, say=lambda _message: None)
    if from_tf:
        # a SavedModel of export_tf, or a TF BERT checkpoint
        load_tf_weights_into(model, checkpoint, say, model_label(run_args))
    elif checkpoint is not None and args.checkpoint is None and args.config is not None \
            and hasattr(model, "load_pretrained"):
        model.load_pretrained(checkpoint, say)  # the model's own loader (BERT: Hugging Face dirs, TF checkpoints)
    elif checkpoint is not None:
        load_weights_into(model, checkpoint, strict, say)
    else:
        say(f"no checkpoint: the model as initialised by {args.config} with seed {args.seed}")
    if run_args.get("lora") is not None and not strict:  # pretrained weights, then fresh adapters (as x-train starts)
        from xdpx.models.lora import add_lora  # lazy: loads torch, numpy

        add_lora(model, run_args, say=lambda _message: None)
    model = model.to(device).eval()
    if args.compile:
        from xdpx.runtime.compiling import compile_module  # lazy: loads torch, numpy

        compile_module(model, say)

    processor = build_processor(run_args, data_dir=processor_dir(args, run_args))
    batch_size = args.batch_size or run_args.get("valid_batch_size") or run_args.batch_size
    return LoadedModel(run_args, task, model, processor, device,
                       autocast(device, bool(run_args.get("fp16")), bool(run_args.get("bf16"))),
                       int(batch_size), checkpoint, run_args.data_dir)
