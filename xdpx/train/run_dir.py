"""What x-train may do to an existing save_dir: recognise its own run directories, refuse the rest.

``overwrite: true`` clears only a folder that x-train made (or an empty one), and only the files x-train
writes there; anything else in it stays. It never clears a folder that holds the data, the current
directory, a home directory, a filesystem or bucket root, or any parent of those. A run directory is
recognised by the marker file written when the run starts (``.xdpx-run``, or its temp file when a kill
came while it was committed), or, for runs written before
the marker existed, by ``args.py`` beside ``state.pt``, ``train.log.tsv`` or ``checkpoints.json`` (not
``log.txt``: x-prepro writes args.py and log.txt too) in a folder without ``meta.hjson`` (x-prepro's). The checks run before any work, with and without ``--dry`` (docs/reliability.md).
"""

from __future__ import annotations

import json
import os
import shlex
import time
from typing import Any

from xdpx import io
from xdpx.config import writers
from xdpx.config.loader import STDIN_NAME
from xdpx.config.options import Args
from xdpx.errors import UserError
from xdpx.io import writer_lock
from xdpx.io.ownership import RUN_MARKER, is_run_dir, is_run_file
from xdpx.models.checkpoints import state_mismatch
from xdpx.runtime.run_files import STATE_FILE
from xdpx.train.code_version import args_header, code_versions
from xdpx.train.snapshot import write_snapshot

# What a run directory is, and which of its files are x-train's (RUN_MARKER, is_run_dir, is_run_file), is
# decided once for every command in xdpx.io.ownership: x-pred, x-prepro ... must not replace them either.

# Files of the data directory a run keeps a copy of (x-eval and x-pred read them from the run).
COPIED_DATA_FILES = ("vocab.txt", "target_map.txt", "tokenizer.json")


def mark_run_dir(save_dir: str) -> None:
    """Write the marker that lets a later ``overwrite: true`` recognise this folder as a run."""
    marker = io.join(save_dir, RUN_MARKER)
    if not io.exists(marker):
        with io.open(marker, "w") as f:
            json.dump({"written_by": "x-train", "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, f)
            f.write("\n")


def preempted_run(save_dir: str, key: str = "preempted") -> dict[str, Any] | None:
    """What the run marker says of a run a preemption signal stopped (signal, update, time), else None;
    ``key="signal_at_end"``: of a run that finished although a signal came during its last update or
    final evaluation."""
    marker = io.join(save_dir, RUN_MARKER)
    if not io.exists(marker):
        return None
    try:
        with io.open(marker) as f:
            found = json.load(f).get(key)
    except (ValueError, AttributeError):  # not our JSON: treat as no preemption (the folder checks still run)
        return None
    return found if isinstance(found, dict) else None


def note_preemption(save_dir: str, info: dict[str, Any] | None, at_end: dict[str, Any] | None = None) -> None:
    """Record in the run marker that a preemption signal stopped the run (``info``), or that the run
    finished although a signal came at its end (``at_end``), or neither (None, None). Written after
    state.pt: a marker never announces a state that is not there."""
    marker = io.join(save_dir, RUN_MARKER)
    content: dict[str, Any] = {}
    if io.exists(marker):
        with io.open(marker) as f:
            content = json.load(f)
    notes = {key: value for key, value in (("preempted", info), ("signal_at_end", at_end)) if value is not None}
    updated = {**{k: v for k, v in content.items() if k not in ("preempted", "signal_at_end")}, **notes}
    if updated == content:
        return
    with io.open(marker, "w") as f:  # atomic (xdpx.io)
        json.dump(updated, f)
        f.write("\n")


def continuation(args: Any) -> tuple[Any, str | None]:
    """``args`` with resume: true (and overwrite / auto_suffix off) when save_dir holds a run a preemption
    signal stopped, with the note that says so; else ``args`` as they are and None. A job requeued after
    preemption runs the very same command, often from a config without resume: true; replacing the run
    (overwrite) or starting another (auto_suffix) would throw away what it saved and never finish. A run
    that finished although a signal came at its end is continued too (nothing left to do) by a config
    that would otherwise be refused ("holds a run"): the scheduler may run the same command again."""
    info = preempted_run(args.save_dir) if args.get("save_dir") else None
    changed = {"resume", "overwrite", "auto_suffix"}
    if info is None:
        at_end = None if args.resume or args.overwrite or args.auto_suffix or not args.get("save_dir") else \
            preempted_run(args.save_dir, "signal_at_end")
        if at_end is None:
            return args, None
        said = (f"{args.save_dir} holds a run that finished although {at_end.get('signal', 'a signal')} came at its "
                f"end (update {at_end.get('update')}): this run continues it (resume: true)")
    elif args.resume and not args.overwrite and not args.auto_suffix:
        return args, None
    else:
        said = (f"{args.save_dir} holds a run that {info.get('signal', 'a signal')} stopped at update "
                f"{info.get('update')} (preemption): this run continues it (resume: true"
                f"{', not overwrite' if args.overwrite else ''}{', not auto_suffix' if args.auto_suffix else ''})")
    values = {**args.as_dict(), "resume": True, "overwrite": False, "auto_suffix": False}
    sources = {**args._sources, **{key: f"{args.save_dir}/{RUN_MARKER}" for key in changed}}
    return Args(values, args._declared, set(args._explicit) | changed, sources, origin=args.origin()), said


def _local_real(path: str) -> str:
    return os.path.realpath(io.abspath(path))


def _contains(outer: str, inner: str) -> bool:
    """Whether ``inner`` is ``outer`` or lies under it (same kind of path; local paths made real)."""
    if io.is_remote(outer) != io.is_remote(inner):
        return False
    if io.is_remote(outer):
        o, i = outer.rstrip("/"), inner.rstrip("/")
        return i == o or i.startswith(o + "/")
    o, i = _local_real(outer), _local_real(inner)
    return i == o or i.startswith(o.rstrip(os.sep) + os.sep)


def protected_reason(save_dir: str, inputs: dict[str, str]) -> str | None:
    """Why ``save_dir`` must never be cleared, or None. ``inputs``: option name -> path the run reads."""
    if io.is_remote(save_dir):
        _, rest = save_dir.split("://", 1)
        if "/" not in rest.strip("/"):
            return "it is a whole bucket"
    else:
        real = _local_real(save_dir)
        if real == os.path.dirname(real):
            return "it is the filesystem root"
        for what, place in (("the current directory", os.getcwd()), ("your home directory", os.path.expanduser("~"))):
            if _contains(real, place):
                return f"it is {what}" if real == _local_real(place) else f"it holds {what}"
    for option, path in inputs.items():
        if path and _contains(save_dir, path):
            return f"it holds {option} {path}"
    return None


def inputs_of(args: Any) -> dict[str, str]:
    """The paths an x-train run reads, which clearing save_dir must never touch."""
    found = {"data_dir": args.data_dir}
    for key in ("pretrained_model", "user_dir"):
        value = args.get(key)
        if value:
            found[key] = value.split("<", 1)[0].rstrip("/") or "."  # 'runs/a/<best>' reads runs/a
    return found


def overwrite_problem(save_dir: str, args: Any) -> str | None:
    """Why ``overwrite: true`` must not clear ``save_dir``, or None when it may (or there is nothing)."""
    if not io.isdir(save_dir) or not writer_lock.entries(save_dir):
        return None
    reason = protected_reason(save_dir, inputs_of(args))
    if reason:
        return f"overwrite refuses to clear {save_dir!r}: {reason}. Choose another save_dir"
    if not is_run_dir(save_dir):
        return (f"overwrite refuses to clear {save_dir!r}: it is not a run directory of x-train (no {RUN_MARKER} "
                "marker, no args.py with its logs or state). Choose another save_dir, or auto_suffix: true")
    return None


def resume_problem(save_dir: str) -> str | None:
    """A non-empty folder that x-train did not make cannot be continued: its files would be replaced."""
    if io.isdir(save_dir) and writer_lock.entries(save_dir) and not is_run_dir(save_dir):
        return (f"resume: {save_dir!r} is not a run directory of x-train (no {RUN_MARKER} marker, no args.py "
                "with its logs or state), and the run would write its files into it. Choose another save_dir")
    return None


def clear_run(save_dir: str, log_file: str | None) -> tuple[list[str], list[str]]:
    """Delete what x-train wrote in a (checked) run directory; (removed names, kept names)."""
    removed, kept = [], []
    for name in writer_lock.entries(save_dir):  # the lock stays: this run holds it
        path = io.join(save_dir, name)
        if not is_run_file(name, log_file):
            kept.append(name)
        elif io.isdir(path):
            io.rmtree(path)
            removed.append(name + "/")
        else:
            io.remove(path)
            removed.append(name)
    return removed, kept


def suffixed_save_dir(save_dir: str) -> str:
    """save_dir, or save_dir.1, save_dir.2 ... : the first that does not exist (auto_suffix)."""
    candidate, n = save_dir, 0
    while io.exists(candidate):
        n += 1
        candidate = f"{save_dir}.{n}"
    return candidate


def dir_in_use(path: str) -> bool:
    return io.isdir(path) and bool(writer_lock.entries(path))


def refusal_start(args: Any, save_dir: str) -> str:
    """``<config>: key 'save_dir': x-train refuses to write '<save_dir>'``: a refusal's first words."""
    return f"{args.source('save_dir')}: key 'save_dir': x-train refuses to write {io.redact(save_dir)!r}"


def held_refusal(args: Any, save_dir: str, holder: dict[str, Any]) -> str:
    return f"{refusal_start(args, save_dir)}: {writer_lock.held_problem(holder, io.join(save_dir, writer_lock.LOCK_FILE))}"


def save_dir_problems(args: Any) -> list[tuple[str, str]]:
    """(key, problem) for what save_dir and overwrite / resume / auto_suffix would do to existing files."""
    save_dir = args.save_dir
    if not args.auto_suffix and io.isfile(save_dir):
        return [("save_dir", f"{save_dir!r} is a file, not a folder: choose a folder for the run")]
    if args.overwrite:
        problem = overwrite_problem(save_dir, args)
        return [("overwrite", problem)] if problem else []
    if args.resume:
        problem = resume_problem(save_dir)
        return [("resume", problem)] if problem else []
    if dir_in_use(save_dir) and not args.auto_suffix:
        if is_run_dir(save_dir):
            return [("save_dir", f"{save_dir!r} holds a run: set resume: true to continue it, overwrite: true "
                                 "to replace it, or auto_suffix: true for a new folder")]
        return [("save_dir", f"{save_dir!r} exists and is not a run directory of x-train: choose another "
                             "save_dir, or auto_suffix: true for a new folder beside it")]
    return []


def run_files_split(save_dir: str, log_file: str | None) -> tuple[list[str], list[str]]:
    """(entries x-train wrote, other entries) of an existing save_dir."""
    names = io.listdir(save_dir)
    return [n for n in names if is_run_file(n, log_file)], [n for n in names if not is_run_file(n, log_file)]


def prepare_run_dir(args: Any) -> tuple[str, list[str]]:
    """Take the run directory's writer lock, make (or, with overwrite, clear) it and mark it; (save_dir,
    lines for the log).

    The lock comes before anything is read or written for the run: a second x-train on the folder is
    refused (exit 2) naming the first. The checks of preflight run again here: the folder may have
    changed since, and a Trainer can be built without the command.
    """
    if not args.auto_suffix and not io.isfile(args.save_dir):
        writer_lock.hold(args.save_dir, "x-train", refusal_start(args, args.save_dir))
    problems = save_dir_problems(args)
    if problems:
        raise UserError("; ".join(problem for _, problem in problems))
    save_dir, said = args.save_dir, []
    if args.auto_suffix:
        save_dir = suffixed_save_dir(save_dir)
        writer_lock.hold(save_dir, "x-train", refusal_start(args, save_dir))
    elif args.overwrite and io.isdir(save_dir):
        removed, kept = clear_run(save_dir, args.log_file)
        if removed:
            said.append(f"overwrite: cleared the earlier run in {save_dir} ({len(removed)} entries: "
                        f"{', '.join(sorted(removed)[:8])}{', ...' if len(removed) > 8 else ''})")
        if kept:
            said.append(f"overwrite: kept {', '.join(sorted(kept))} in {save_dir} (not written by x-train)")
    io.makedirs(save_dir)
    for name in io.listdir(save_dir):  # temp files of local writes cut short by a kill
        if name.startswith(".") and name.endswith(".tmp"):
            io.remove(io.join(save_dir, name))
    mark_run_dir(save_dir)
    return save_dir, said


def check_resumable(state: dict[str, Any], module: Any, optimizer: Any, state_path: str) -> None:
    """A UserError, before anything is loaded, when state.pt was saved by another model or optimizer."""
    fix = ("Resume with the options the run was started with (its starter_config.hjson), or start a new run: "
           "another save_dir, or auto_suffix: true")
    if not isinstance(state, dict) or not {"model", "optimizer", "counters"} <= set(state):
        raise UserError(f"resume: {state_path} is not a training state of x-train. {fix}")
    problem = state_mismatch(module.state_dict(), state["model"])
    if problem:
        raise UserError(f"resume: {state_path} was saved by another model or shape than this config builds "
                        f"({problem}). {fix}")
    saved_groups = state["optimizer"].get("param_groups", [])
    own_groups = optimizer.state_dict()["param_groups"]
    if [len(g["params"]) for g in saved_groups] != [len(g["params"]) for g in own_groups]:
        raise UserError(f"resume: the optimizer state in {state_path} does not fit this config's optimizer "
                        f"(parameter groups {[len(g['params']) for g in saved_groups]} saved, "
                        f"{[len(g['params']) for g in own_groups]} now). {fix}")
    # the same optimizer class writes the same group settings; another one has settings this one lacks
    extra = sorted(set(saved_groups[0]) - set(own_groups[0]) - {"initial_lr"}) if saved_groups and own_groups else []
    if extra:
        raise UserError(f"resume: {state_path} was saved with another optimizer (its settings {extra} are not "
                        f"this optimizer's). {fix}")


def outage_message(error: Exception, args: Any, save_dir: str | None) -> str:
    """What to tell a user whose run stopped because the object store stayed away: the cause, that nothing
    is corrupt, and how to continue. The command names the config file the user ran (``args.origin()``),
    not the parent file that happened to set save_dir: running a parent would run another config."""
    save_dir = save_dir or args.save_dir
    return (f"{error}\nThe run stopped cleanly: every file in {save_dir} is complete or absent (writes are "
            f"atomic). When the store answers again, continue it from its last saved state: "
            f"{continue_command(args, save_dir)}")


def continue_command(args: Any, save_dir: str) -> str:
    """How to continue the run in ``save_dir`` from its state.pt: the command, and the options to set
    first when the config does not resume as it is. The config named is the one the user ran
    (``args.origin()``), not the parent file that happened to set save_dir."""
    config = args.origin()
    changes = [] if args.resume else ["resume: true"]
    if save_dir != args.save_dir:  # auto_suffix chose the folder
        changes.append(f"save_dir: {save_dir}")
    if args.overwrite or args.auto_suffix:
        changes.append("overwrite: false, auto_suffix: false")
    if config == STDIN_NAME:
        return (f"add {', '.join(changes)} to the config you gave on standard input and give it again: "
                if changes else "give the same config on standard input again: ") + "x-train - < that config"
    run = f"x-train {shlex.quote(config)}"
    return f"set {', '.join(changes)} in {config}, then run: {run}" if changes else f"run: {run}"


def shared_run_dir(args: Any, context: Any) -> tuple[str, list[str]]:
    """The run directory every process writes to, made (or cleared) by rank 0; (save_dir, log lines)."""
    save_dir, said = args.save_dir, []
    if context.is_main:  # overwrite clears only a run directory of x-train
        save_dir, said = prepare_run_dir(args)
    if context.distributed:  # every rank writes to the folder rank 0 chose
        # lazy: loads torch
        import torch.distributed  # only here: x-train --dry reads this module without torch

        chosen = [save_dir]
        torch.distributed.broadcast_object_list(chosen, src=0)
        save_dir = chosen[0]
    return save_dir, said


def write_run_files(args: Any, save_dir: str, say: Any) -> None:
    """args.py, starter_config.hjson, the data's vocabulary files, snapshot.zip; ``say``: the code version."""
    versions = code_versions(args.get("user_dir"))
    say("code version: " + ("; ".join(v.describe() for v in versions) or "not in a git work tree")
        + " (the source itself is in snapshot.zip)")
    writers.write_run_files(args, save_dir, header=args_header(versions))
    masked = writers.masked_options(args)
    if masked:
        say(writers.masked_notice(masked, "args.py, starter_config.hjson and the logs"))
    for name in COPIED_DATA_FILES:
        source = io.join(args.data_dir, name)
        if io.exists(source):
            io.copy(source, io.join(save_dir, name))
    write_snapshot(save_dir, args.get("user_dir"))


def resume_hint(save_dir: str) -> str:
    """How to go on after fixing what stopped the run: resume from its state.pt, or start again."""
    if io.exists(io.join(save_dir, STATE_FILE)):
        return (f"The run directory {save_dir} keeps its last saved state: after the fix, "
                "continue it with resume: true.")
    return f"Nothing was saved yet in {save_dir}: after the fix, start again (resume: true works too)."
