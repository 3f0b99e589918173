"""x-train in processes forked from a server that imported torch and xdpx once (multiprocessing's
forkserver): a run starts in ~0.1 s instead of ~2 s, so a test can afford dozens of kill points."""

from __future__ import annotations

import importlib.util
import multiprocessing
from typing import Any

from train_runs import KILL_RUNNER

_context: Any = None


def _kill_runner() -> Any:
    spec = importlib.util.spec_from_file_location("kill_runner", KILL_RUNNER)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _train(config: str, where: str, n: int) -> None:
    """In the forked process: arm the kill point, train, exit with x-train's code."""
    import os
    import sys

    import torch

    from xdpx.cli import run_chain

    torch.set_num_threads(1)  # the intra-op pool of a forked process: one thread, no oversubscription
    _kill_runner().install(where, n)
    sys.stdout = sys.stderr = open(os.devnull, "w")  # the parent reads files, not chatter
    os._exit(run_chain(["x-train", config]))  # no atexit work in a fork of the server


def preload_modules() -> list[str]:
    """What an x-train run imports (by name: the forkserver imports them before it forks anything, and
    runs no torch operation, so the forked processes inherit no started thread pool)."""
    from xdpx.command import commands, scripts
    from xdpx.data import loaders, parsers, processors, tokenizers
    from xdpx.losses import losses
    from xdpx.metrics import metrics
    from xdpx.models import models
    from xdpx.optim import lr_schedulers, optimizers
    from xdpx.tasks import tasks

    registries = (commands, scripts, loaders, parsers, processors, tokenizers, losses, metrics, models,
                  optimizers, lr_schedulers, tasks)
    return ["numpy", "hjson", "torch", "torch._dynamo", "torch.distributed", "torch.nn.parallel", "xdpx.cli",
            "xdpx.config.loader", "xdpx.config.writers", "xdpx.data.dataset", "xdpx.runtime.scoring",
            "xdpx.train.loop", "xdpx.train.snapshot", *[m for r in registries for m in r._modules]]


def train_forked(config: Any, where: str = "never", n: int = 0, timeout: float = 120) -> int:
    """x-train ``config`` in a forked process that SIGKILLs itself at the n-th ``where`` (kill_runner.py);
    returns the exit code (-9 when killed)."""
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(preload_modules())
    process = _context.Process(target=_train, args=(str(config), where, n))
    process.start()
    process.join(timeout)
    if process.exitcode is None:
        process.kill()
        process.join()
        raise TimeoutError(f"x-train {config} did not finish in {timeout} s (kill point {where} {n})")
    return int(process.exitcode)
