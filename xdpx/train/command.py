"""The x-train command: options, the checks of ``--dry``, then the loop (xdpx/train/loop.py).

Nothing here imports torch at module level: ``x-train --dry`` resolves and checks without it where the
chosen components allow.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

from xdpx import io
from xdpx.command import Command, commands
from xdpx.config.errors import ConfigError
from xdpx.config.loader import Config, wrong_folder_hint
from xdpx.config.options import Args
from xdpx.data.meta import META_OPTIONS
from xdpx.io.credentials import redact
from xdpx.train.preemption import stop_before_work, watching_from_start
from xdpx.utils.distributed_utils import is_master


@commands.register("x-train")
class TrainCommand(Command):
    """Train a model on x-prepro output; save_dir receives everything about the run (docs/train.md)."""

    name = "x-train"
    example = "x-train examples/reviews/train_cnn.hjson"
    group = "train"
    output_key = "save_dir"
    every_rank = True

    def options(self) -> list[Any]:
        from xdpx.train.options import TRAIN_OPTIONS, registry_options  # lazy: keeps --help light

        return list(TRAIN_OPTIONS) + registry_options() + list(META_OPTIONS)

    def prepare(self, config: Config) -> Config:
        """A data_dir that holds no meta.hjson, in a config that got no data facts from anywhere (no
        processor): one problem naming data_dir, instead of the eight missing keys (processor, tokenizer,
        max_len...) that meta.hjson would have given."""
        data_dir = config.values.get("data_dir")
        if not isinstance(data_dir, str) or "processor" in config.values or io.exists(io.join(data_dir, "meta.hjson")):
            return config
        where = "" if io.is_remote(data_dir) or io.abspath(data_dir) == data_dir else \
            f" ({io.abspath(data_dir)}: a relative data_dir is relative to the working directory)"
        source = config.sources.get("data_dir", config.file)
        moved = wrong_folder_hint("data_dir", io.join(data_dir, "meta.hjson"), source, ("",))
        raise ConfigError(f"{source}: key 'data_dir': {data_dir!r}{where} holds no meta.hjson" + (f".{moved}" if moved else (
                          ": data_dir must be the output folder of x-prepro (it writes meta.hjson there): "
                          "run x-prepro with this data_dir first, or fix data_dir; inherit its data facts with "
                          "__parent__: ${data_dir}/meta")))

    def preflight(self, args: Args) -> tuple[list[str], list[str]]:
        """x-train's checks of data_dir, save_dir, the batch and the teacher (xdpx/train/checks.py)."""
        from xdpx.train.checks import preflight  # lazy: loads numpy

        return preflight(args)

    def running(self, dry: bool) -> contextlib.AbstractContextManager[Any]:
        """SIGUSR1 / SIGTERM noted from before the config is read (its imports and checks take seconds):
        a signal at any point of x-train stops it with exit code 3 (xdpx/train/preemption.py)."""
        return contextlib.nullcontext() if dry else watching_from_start()

    def run(self, args: Args, dry: bool = False) -> None:
        from xdpx.train.checks import preflight, valid_in_training  # lazy: loads numpy
        from xdpx.train.launch import launch, launch_problems, processes_to_start  # lazy: keeps --help light
        from xdpx.train.legacy_options import legacy_notes  # lazy: keeps --help light
        from xdpx.train.run_dir import continuation  # lazy: loads numpy

        # a run a preemption signal stopped is continued by the same command (the requeued job's)
        args, continued = continuation(args)
        if continued and is_master():
            print(redact(f"note: {continued}"))
        # Under torchrun only rank 0 checks the files: another rank listing save_dir while rank 0 probes it
        # for writing could see the probe. A failed check on rank 0 ends the job for all.
        problems, notes = preflight(args) if is_master() or dry else ([], [])
        problems += launch_problems(args)
        if problems:
            raise ConfigError(problems)
        if is_master():  # on stderr (log.txt gets it too): a cross-validation fold may train on its valid split
            warning = valid_in_training(args)
            if warning:
                print(redact(warning), file=sys.stderr)
        for note in legacy_notes(args) if is_master() else []:
            print(redact(f"note: {note}"))
        if dry:
            for note in notes:
                print(redact(f"# {note}"))  # notes quote options and paths: credentials masked
            return
        stop_before_work(args.save_dir)  # a signal during the start-up: exit 3 before anything is written
        nproc = processes_to_start(args)
        if nproc > 1:  # several GPUs (or distributed_world_size) and no launcher: start the processes
            launch(args, nproc)
            return
        from xdpx.train.loop import train  # lazy: loads torch, numpy

        train(args)
