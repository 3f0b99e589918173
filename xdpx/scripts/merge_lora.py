"""``x-script merge_lora SAVE_DIR --out OUT_DIR [--checkpoint CKPT] [--parity-data-dir DIR]``: fold a LoRA
run's adapters into a plain model.

SAVE_DIR is an x-train run trained with ``lora``. Its checkpoint (as x-eval chooses: ``<best>``, else
``<last>``; ``--checkpoint`` takes an alias or a path) is loaded with the adapters, each adapter is merged into its
base weight (W + B A x alpha / r, peft's merge), and OUT_DIR becomes a run directory of the plain model:
args.py and starter_config.hjson (the run's options with ``lora: null``), the data files x-eval / x-pred
read (vocab.txt, target_map.txt, tokenizer.json), the merged weights as checkpoint-<update>.pt with
checkpoints.json naming it <best> and <last>, and log.txt saying where it came from. x-eval, x-pred,
x-serve and every export take OUT_DIR as any run.

Before writing, the merged model is checked against the adapters on real samples of the run's data
(xdpx.export.parity: several batch shapes): every output within 1e-5, else nothing is written.
"""

from __future__ import annotations

import copy
import json
import re
import time
from typing import Any

from xdpx import io
from xdpx.command import COMMON_OPTIONS, script
from xdpx.config.errors import ConfigError
from xdpx.config.options import resolve
from xdpx.config.writers import write_run_files
from xdpx.errors import UserError
from xdpx.inference.options import LOAD_OPTIONS
from xdpx.io.ownership import RUN_MARKER, Output, check_outputs, claim, is_run_dir
from xdpx.models.checkpoints import BEST, LAST, checkpoint_name, save_torch, write_index
from xdpx.scripts.result_tables import split_flags
from xdpx.utils.step_progress import Phases

TOOL = "merge_lora"
USAGE = "usage: x-script merge_lora SAVE_DIR --out OUT_DIR [--checkpoint CKPT] [--parity-data-dir DIR]"
PARITY_ATOL = 1e-5  # merged vs adapters: float rounding of W + BA only
COPIED_FILES = ("vocab.txt", "target_map.txt", "tokenizer.json")


def load_options(save_dir: str, checkpoint: str | None, extra: dict[str, Any] | None = None) -> Any:
    """x-eval's options for the run (``extra`` overrides the run's own, as extra_config); no checkpoint:
    <best>, else <last>, else the latest state, as x-eval chooses."""
    spec = io.join(save_dir, checkpoint) if checkpoint in (BEST, LAST) else checkpoint
    values = {"save_dir": save_dir, "checkpoint": spec, "cuda": False, "extra_config": extra or {}}
    return resolve(values, COMMON_OPTIONS + LOAD_OPTIONS, TOOL, check_paths=False)


def merged_copy(model: Any) -> Any:
    """A copy of ``model`` with its adapters folded in (the original keeps them, for the parity check)."""
    # lazy: models.lora imports torch; x-script --help imports every tool
    from xdpx.models.lora import merge_lora

    return merge_lora(copy.deepcopy(model)).eval()


def check_merge(loaded: Any, merged: Any, data_dir: str | None) -> str:
    """Outputs of the merged model vs the adapters on real samples; the report line (ParityError -> UserError)."""
    # lazy: the parity check waits for a run; x-script --help imports every tool
    from xdpx.export.parity import ParityError, check_parity, parity_batches, real_samples

    batches = parity_batches(loaded.processor, real_samples(loaded.run_args, data_dir=data_dir))
    try:
        report = check_parity(lambda b: loaded.model(**b), lambda b: merged(**b), batches, "merged model",
                              atol=PARITY_ATOL, rtol=0.0)
    except ParityError as e:
        raise UserError(f"{TOOL}: {e}; nothing written") from None
    return report.describe()


def write_run(out: str, run_args: Any, weights: dict[str, Any], step: int, source: str, parity: str,
              save_dir: str) -> str:
    """OUT_DIR as a run directory of the plain model; returns the checkpoint's path."""
    io.makedirs(out)
    claim(TOOL, out)
    write_run_files(run_args, out, header=f"# x-script merge_lora of {source}: the adapters folded in\n")
    for name in COPIED_FILES:
        if io.exists(io.join(save_dir, name)):
            io.copy(io.join(save_dir, name), io.join(out, name))
    path = io.join(out, checkpoint_name(step))
    save_torch(weights, path)
    write_index(out, {"best": checkpoint_name(step), "last": checkpoint_name(step)})
    with io.open(io.join(out, RUN_MARKER), "w") as f:
        json.dump({"written_by": TOOL, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, f)
        f.write("\n")
    with io.open(io.join(out, "log.txt"), "w") as f:
        f.write(f"x-script merge_lora: {source} with its LoRA adapters merged into the weights "
                f"({parity} against the adapters)\n")
    return path


def parse(argv: list[str]) -> tuple[str, str, str | None, str | None]:
    flags: dict[str, str | None] = {"out": None, "checkpoint": None, "parity-data-dir": None}
    positional, values = split_flags(argv, flags, USAGE)
    if len(positional) != 1 or not values["out"]:
        raise ConfigError([f"give one SAVE_DIR and --out OUT_DIR. {USAGE}"])
    return positional[0], str(values["out"]), values["checkpoint"], values["parity-data-dir"]


@script(TOOL)
def main(argv: list[str]) -> int:
    """Merge the LoRA adapters of an x-train run into a plain model, written to OUT_DIR as a run directory.

    The checkpoint is --checkpoint (default <best>); the merged model is checked against the adapters on real
    samples (<= 1e-5), and x-eval, x-pred, x-serve and the exports load OUT_DIR like any run."""
    # lazy: the run-loading side (models, checkpoints); every command's --help imports each tool's module
    from xdpx.inference.loading import load_model, run_options

    save_dir, out, checkpoint, data_dir = parse(argv)
    if not io.isdir(save_dir) or not is_run_dir(save_dir):
        raise UserError(f"{TOOL}: {save_dir} is not a run directory of x-train")
    problems = check_outputs(TOOL, [Output("out", out, kind="folder")], [("save_dir", save_dir)],
                             lambda _key: f"x-script {TOOL}")
    if problems:
        raise ConfigError(problems)
    options = load_options(save_dir, checkpoint)
    run_args = run_options(options)
    if run_args.get("lora") is None:
        raise UserError(f"{TOOL}: {save_dir} trained without lora (its args.py has lora: null): there is nothing "
                        "to merge; x-eval, x-pred and the exports load it as it is")
    phases = Phases(f"x-script {TOOL}")  # a minute or two on a CPU for a base-sized model: say where it is
    phases.start(f"loading {save_dir} with its adapters")
    loaded = load_model(options, run_args, say=lambda _message: None)
    phases.start("merging the adapters into the weights")
    merged = merged_copy(loaded.model)
    phases.start("checking the merged model against the adapters on real samples")
    parity = check_merge(loaded, merged, data_dir)
    name = io.basename(loaded.checkpoint or "")
    match = re.match(r"^checkpoint-(\d+)\.pt$", name)
    step = int(match.group(1)) if match else 0
    plain = run_options(load_options(save_dir, checkpoint, {"lora": None, "save_dir": out}))
    phases.start(f"writing {out}")
    path = write_run(out, plain, merged.state_dict(), step, loaded.checkpoint, parity, save_dir)
    print(f"merged the LoRA adapters of {loaded.checkpoint} -> {out} ({path}); {parity}")
    return 0
