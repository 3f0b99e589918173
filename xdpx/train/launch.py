"""x-train starts its own processes on a machine with several GPUs (no torchrun to type).

With ``distributed_world_size`` (default: one per visible GPU) above 1 and no launcher around it, x-train
starts that many processes through torch's own launcher API (``torch.distributed.launcher.api``, what
torchrun runs: a c10d rendezvous on 127.0.0.1, RANK / WORLD_SIZE / LOCAL_RANK set for each process) and
waits for them. Each process resolves the run's config again (the explicit values and their sources,
which are plain data) and runs x-train as it would under torchrun. Under torchrun or Slurm the launcher
has already decided and this module does nothing.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from typing import Any

from xdpx import io
from xdpx.command import COMMON_OPTIONS, get_command
from xdpx.config.errors import ConfigError
from xdpx.config.options import Option, resolve
from xdpx.config.ranges import at_least
from xdpx.errors import EXIT_CONFIG, EXIT_FAILED, EXIT_REQUEUE, UserError
from xdpx.io import writer_lock
from xdpx.io.credentials import redact
from xdpx.models.checkpoints import load_torch
from xdpx.registry import load_user_dir
from xdpx.runtime.run_files import STATE_FILE
from xdpx.train.preemption import Preempted

LAUNCH_OPTIONS: list[Any] = [
    Option("distributed_world_size", int, default=None, validate=at_least(1),
           doc="processes (devices) to train with on this machine when x-train is started without a launcher: "
               "x-train starts them itself (torch's elastic launcher; one GPU each, or gloo on the CPU). "
               "null: one per visible GPU (limit them with CUDA_VISIBLE_DEVICES), one without GPUs or with "
               "cpu: true. Under torchrun or Slurm the launcher decides; a different explicit value is an error"),
]


def launcher_world_size() -> int | None:
    """WORLD_SIZE when a launcher (torchrun, x-train itself) started this process."""
    value = os.environ.get("WORLD_SIZE")
    return int(value) if value else None


def launch_problems(args: Any) -> list[str]:
    started = launcher_world_size()
    wanted = args.get("distributed_world_size")
    if started is not None and wanted is not None and wanted != started:
        return [f"{args.source('distributed_world_size')}: key 'distributed_world_size': {wanted}, but the launcher "
                f"started {started} processes: remove the key or make them agree"]
    return []


def processes_to_start(args: Any) -> int:
    """How many processes x-train starts itself: 1 under a launcher (it already started them)."""
    if launcher_world_size() is not None:
        return 1
    wanted = args.get("distributed_world_size")
    if wanted is not None:
        return wanted
    if args.cpu:
        return 1
    import torch  # lazy: loads torch

    return max(1, torch.cuda.device_count())


SIGNALS_VARIABLE = "TORCHELASTIC_SIGNALS_TO_HANDLE"  # the signals torch's elastic agent passes to its processes


def preempted_exit(failures: dict[int, Any]) -> bool:
    """Whether the processes stopped on a preemption signal: rank 0, which saves the state, exited with
    EXIT_REQUEUE after saving it; the others with EXIT_REQUEUE too, or by the SIGTERM with which the agent
    stops the processes left once one has exited."""
    main = failures.get(0)
    return main is not None and main.exitcode == EXIT_REQUEUE and all(
        f.exitcode in (EXIT_REQUEUE, -signal.SIGTERM) for f in failures.values())


def saved_after_signal(save_dir: str, since: float) -> str | None:
    """'preempted' when state.pt in ``save_dir`` was written after ``since`` by a run a preemption signal
    stopped, 'finished' by a run that finished (the signal came at its end), else None."""
    path = io.join(save_dir, STATE_FILE)
    if io.is_remote(path) or not io.exists(path) or os.path.getmtime(path) < since:
        return None
    counters = load_torch(path).get("counters", {})
    return "finished" if counters.get("finished") else "preempted" if counters.get("preempted_by") else None


def raise_preempted(nproc: int) -> None:
    print(f"x-train: the {nproc} processes stopped on a preemption signal after saving the run's state "
          "(log.txt says how to continue); exit code 3", flush=True)
    raise Preempted()


def launch(args: Any, nproc: int) -> None:
    """Run x-train with ``args`` in ``nproc`` local processes; raises UserError when one fails."""
    from torch.distributed.elastic.multiprocessing.api import SignalException  # lazy: loads torch
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError  # lazy: loads torch
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch  # lazy: loads torch

    explicit = {name: value for name, value in args.items() if name in args._explicit}
    sources = {name: args.source(name) for name in explicit}
    config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=nproc, run_id=uuid.uuid4().hex,
                          rdzv_backend="c10d", rdzv_endpoint="127.0.0.1:0", max_restarts=0, monitor_interval=0.1,
                          start_method="spawn")
    # as torchrun does, split the CPU threads between the processes unless the user chose (the processes
    # inherit this environment; this process keeps its own)
    chosen = os.environ.get("OMP_NUM_THREADS")
    threads = chosen or str(max(1, (os.cpu_count() or 1) // nproc))
    print(f"x-train: starting {nproc} processes (distributed_world_size; {threads} CPU thread(s) each)", flush=True)
    os.environ["OMP_NUM_THREADS"] = threads
    # the elastic agent installs its own signal handlers in this process; a chain goes on without them.
    # On one of these it sends the same signal to the processes, waits for them (30 s) and raises
    # SignalException. SIGUSR1 is added to its list: a scheduler's preemption signal to this process
    # reaches the ranks, which save their state and exit EXIT_REQUEUE (xdpx/train/preemption.py).
    forwarded = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1)
    handlers = {sig: signal.getsignal(sig) for sig in forwarded}
    chosen_signals = os.environ.get(SIGNALS_VARIABLE)
    os.environ[SIGNALS_VARIABLE] = ",".join(sig.name for sig in forwarded)
    started = time.time()
    try:
        elastic_launch(config, _worker)(explicit, sources, args.origin())
    except ChildFailedError as error:
        if preempted_exit(error.failures):
            raise_preempted(nproc)
        rank, failure = min(error.failures.items(), key=lambda item: item[0]) if error.failures else (None, None)
        detail = f"rank {rank} exited with code {failure.exitcode}" if failure else str(error)
        raise UserError(f"x-train with {nproc} processes failed: {detail} (its error is printed above); "
                        "fix it and run again, with resume: true to continue from the last saved state") from None
    except SignalException as error:  # the processes were stopped (Ctrl-C, a scheduler's SIGTERM)
        saved = saved_after_signal(args.save_dir, started) if error.sigval in (signal.SIGTERM, signal.SIGUSR1) else None
        if saved == "finished":  # the signal came at the run's end: it is finished (log.txt notes the signal)
            print(f"x-train: the {nproc} processes finished the run; signal {error.sigval} came at its end", flush=True)
            return
        if saved == "preempted":
            raise_preempted(nproc)
        raise UserError(f"x-train with {nproc} processes was stopped by signal {error.sigval}; continue it with "
                        "resume: true") from None
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        if chosen_signals is None:
            del os.environ[SIGNALS_VARIABLE]
        else:
            os.environ[SIGNALS_VARIABLE] = chosen_signals
        if chosen is None:
            del os.environ["OMP_NUM_THREADS"]


def _worker(explicit: dict[str, Any], sources: dict[str, str], origin: str = "config") -> None:
    """One process of :func:`launch`: resolve the run again and train (a failure exits non-zero)."""
    if explicit.get("user_dir"):
        load_user_dir(explicit["user_dir"])
    command = get_command("x-train")
    try:
        # origin: the config file the user ran, which the messages name (e.g. the command to continue)
        args = resolve(explicit, COMMON_OPTIONS + command.options(), command.group, sources=sources, origin=origin)
        # rank 0 takes the run directory's lock: released however it ends; a preemption signal from here on
        # (the checks, the model's building) exits 3 too (xdpx/train/preemption.py)
        with command.running(dry=False), writer_lock.scope():
            command.run(args)
    except ConfigError as e:
        print(f"x-train: error: {redact(str(e))}", file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    except UserError as e:
        print(f"x-train: error: {redact(str(e))}", file=sys.stderr)
        sys.exit(EXIT_FAILED)
