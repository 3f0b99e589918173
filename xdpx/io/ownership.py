"""Nothing deletes or overwrites what it did not create: what XDPX wrote, and one check for every output.

Each folder an XDPX command writes into keeps a record, ``.xdpx-written`` (JSON): the command that made
the folder its own (``owner``: x-prepro's data_dir, an export's out_dir, an x-tune study, a plots
folder) and the single files other commands wrote there (``files``: x-pred's predictions, x-eval's
save_to_file). Older evidence counts too, so folders written before the record existed keep working: an
x-train run directory (its ``.xdpx-run`` marker, or args.py beside its logs or state) owns the files
x-train writes there; an x-prepro data directory (meta.hjson) owns its data files; a command may
recognise its own older outputs (:attr:`Output.legacy`).

Before any work, also under ``--dry``, the dispatcher asks :func:`check_outputs` about every output of
every run: an output that is, or holds, one of the command's inputs, a file XDPX did not write or
another command wrote, or a non-empty folder that is not the command's own kind is refused with one
message format (the config file, the key, the path, the reason, the fix). After a run,
:func:`recording` writes the record. Inside its own folder a command replaces the files it writes, as
x-train's ``overwrite`` does in a run directory. docs/reliability.md lists the promise per command.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from xdpx import io
from xdpx.io.atomic import is_temp_of
from xdpx.io.credentials import redact
from xdpx.io.study_folder import STUDY_FILE
from xdpx.io.writer_lock import LOCK_FILE, read_holder

MANIFEST = ".xdpx-written"
RUN_MARKER = ".xdpx-run"
# Files and folders x-train (and x-viz / the TensorBoard mirror, which write into the run) create.
RUN_FILES = frozenset({
    RUN_MARKER, "args.py", "starter_config.hjson", "log.txt", "train.log.tsv", "valid.log.tsv", "state.pt",
    "checkpoints.json", "snapshot.zip", "vocab.txt", "target_map.txt", "tokenizer.json", "plots", "tensorboard",
})
_RUN_PATTERNS = re.compile(r"^(checkpoint-\d+\.pt|state-\d+\.pt|\..+\.tmp)$")
# Files that, beside args.py, say that x-train wrote the folder (runs made before the marker existed);
# x-prepro's output also holds args.py and log.txt, and always meta.hjson.
_LEGACY_EVIDENCE = ("state.pt", "train.log.tsv", "checkpoints.json")
DATA_DIR_FILE = "meta.hjson"
# What x-prepro writes into a data directory (docs/prepro.md): split files are {split}.{field}.bin/.idx/.npy.
_DATA_FILES = frozenset({DATA_DIR_FILE, "vocab.txt", "target_map.txt", "embeddings.npy", "tokenizer.json",
                         "args.py", "log.txt"})
_DATA_PATTERNS = re.compile(r"^[^/]+\.(bin|idx|npy)$")
PLOTS_DIR = "plots"


@dataclass(frozen=True)
class Output:
    """One thing a run writes: ``key`` (the option naming it), ``path``, ``kind`` ("file", or "folder" that
    the command fills). ``also``: other commands whose outputs of this kind it may replace (x-viz redraws
    x-train's plots). ``legacy(path)``: True for an output of this command written before records were kept."""

    key: str
    path: str
    kind: str = "file"
    also: tuple[str, ...] = ()
    legacy: Callable[[str], bool] | None = None


# ---- x-train's run directories ------------------------------------------------------------------------------


def is_run_file(name: str, log_file: str | None = None) -> bool:
    """Whether x-train writes an entry of this name into a run directory."""
    return name in RUN_FILES or name == log_file or bool(_RUN_PATTERNS.match(name))


def is_run_dir(path: str) -> bool:
    """Whether ``path`` is a run directory made by x-train (marker or the marker's temp file, or args.py with
    its logs or state)."""
    if not io.isdir(path):
        return False
    names = set(io.listdir(path))
    if DATA_DIR_FILE in names:
        return False
    # the marker's temp file alone: the run was killed while it committed its very first file
    if RUN_MARKER in names or any(is_temp_of(n, RUN_MARKER) for n in names):
        return True
    return "args.py" in names and any(n in names for n in _LEGACY_EVIDENCE)


# ---- the record ----------------------------------------------------------------------------------------------


def read_manifest(folder: str) -> dict[str, Any]:
    """``{"owner": command or None, "files": {name: command}}`` of a folder (empty when it has none)."""
    path = io.join(folder, MANIFEST)
    try:
        with io.open(path) as f:
            data = json.load(f)
    except (FileNotFoundError, NotADirectoryError, ValueError):  # none yet, or not readable as a record
        return {"owner": None, "files": {}}
    files = data.get("files") if isinstance(data, dict) else None
    owner = data.get("owner") if isinstance(data, dict) else None
    return {"owner": owner if isinstance(owner, str) else None, "files": dict(files) if isinstance(files, dict) else {}}


def _write_manifest(folder: str, manifest: dict[str, Any]) -> None:
    with io.open(io.join(folder, MANIFEST), "w") as f:  # atomic: a reader sees the old or the new record
        json.dump({"about": "what XDPX wrote in this folder (docs/reliability.md)", **manifest}, f, indent=1,
                  sort_keys=True)
        f.write("\n")


def record(command: str, path: str) -> None:
    """Note in its folder's record that ``command`` wrote the file ``path``."""
    folder, name = _parent(path), io.basename(path.rstrip("/"))
    manifest = read_manifest(folder)
    if manifest["files"].get(name) != command and manifest["owner"] != command:
        manifest["files"][name] = command
        _write_manifest(folder, manifest)


def claim(command: str, folder: str) -> None:
    """Note that ``command`` made ``folder`` its own (kept when it already has an owner)."""
    manifest = read_manifest(folder)
    if manifest["owner"] is None:
        manifest["owner"] = command
        _write_manifest(folder, manifest)


@contextmanager
def recording(command: str, outputs: Sequence[Output]) -> Iterator[None]:
    """Around a run: afterwards, record the outputs it wrote. After a failure only the outputs that did not
    exist before count (what a failed run leaves in an existing folder is recorded by the next success)."""
    existed = {out.path: io.exists(out.path) for out in outputs}
    succeeded = False
    try:
        yield
        succeeded = True
    finally:
        for out in outputs:
            try:
                if not io.exists(out.path) or not (succeeded or not existed[out.path]):
                    continue
                if out.kind == "folder":
                    claim(command, out.path)
                else:
                    record(command, out.path)
            except OSError as error:  # the record must not hide the run's own outcome
                print(f"warning: could not record {redact(out.path)} in {MANIFEST}: {error}")


# ---- who wrote it ------------------------------------------------------------------------------------------


def _parent(path: str) -> str:
    return io.dirname(path.rstrip("/")) or "."


def folder_owner(folder: str) -> str | None:
    """The command whose folder this is: its record, else an x-train run directory, an x-prepro data
    directory, or the plots folder of a run (x-train draws it)."""
    owner = read_manifest(folder)["owner"]
    if owner:
        return owner
    if io.isfile(io.join(folder, STUDY_FILE)):  # written when an x-tune study first takes the folder
        return "x-tune"
    if is_run_dir(folder):
        return "x-train"
    if io.isfile(io.join(folder, DATA_DIR_FILE)):
        return "x-prepro"
    if io.basename(folder.rstrip("/")) == PLOTS_DIR and is_run_dir(_parent(folder)):
        return "x-train"
    return None


def file_owner(path: str) -> str | None:
    """The command that wrote the existing file ``path``, or None when no record or evidence says XDPX did."""
    folder, name = _parent(path), io.basename(path.rstrip("/"))
    if name == LOCK_FILE:  # the writer lock (xdpx/io/writer_lock.py) names its command
        return (read_holder(path) or {}).get("command") or "an XDPX command"
    if name == STUDY_FILE:
        return "x-tune"
    manifest = read_manifest(folder)
    if name in manifest["files"]:
        return manifest["files"][name]
    if manifest["owner"]:  # the folder is a command's own: its entries are that command's
        return manifest["owner"]
    owner = folder_owner(folder)
    if owner == "x-train" and (is_run_file(name) or io.basename(folder.rstrip("/")) == PLOTS_DIR):
        return owner
    if owner == "x-prepro" and (name in _DATA_FILES or _DATA_PATTERNS.match(name)):
        return owner
    return None


# ---- the check -----------------------------------------------------------------------------------------------


def _real(path: str) -> str:
    if io.is_remote(path):
        return path.rstrip("/")
    return os.path.realpath(io.abspath(path))


def _contains(outer: str, inner: str) -> bool:
    """Whether ``inner`` is ``outer`` or lies under it (local paths made real)."""
    if io.is_remote(outer) != io.is_remote(inner):
        return False
    o, i = _real(outer), _real(inner)
    sep = "/" if io.is_remote(outer) else os.sep
    return i == o or i.startswith(o.rstrip(sep) + sep)


def _file_above(path: str) -> str | None:
    """The nearest existing ancestor of ``path`` when it is a file (nothing can be written under it)."""
    current = _parent(path)
    while True:
        if io.exists(current):
            return None if io.isdir(current) else current
        parent = _parent(current)
        # stop at the filesystem root, or at a bucket (nothing above it is a path of the store)
        if parent == current or (io.is_remote(current) and "/" not in current.split("://", 1)[1].strip("/")):
            return None
        current = parent


def _written_by(owner: str, path: str) -> str:
    if owner == "x-train":
        return f"x-train wrote it (a file of the run directory {redact(_parent(path))})"
    return f"{owner} wrote it"


def output_problem(command: str, out: Output, inputs: Sequence[tuple[str, str]]) -> str | None:
    """Why ``command`` must not write ``out``, with the fix; None when it may."""
    path = out.path
    for key, source in inputs:
        if _contains(path, source):
            what = "is" if _real(path) == _real(source) else "holds"
            return (f"it {what} the input {key} {redact(source)!r}. Choose another path for {out.key}: an output "
                    "never replaces what the command reads")
    above = _file_above(path)
    if above is not None:
        owner = file_owner(above)
        return (f"{redact(above)} is a file{f' ({_written_by(owner, above)})' if owner else ''}, not a folder. "
                f"Choose another path for {out.key}")
    mine = {command, *out.also}
    if out.kind == "folder":
        return _folder_problem(command, out, mine)
    if not io.exists(path):
        return None
    if io.isdir(path):
        return f"it is a folder. Give {out.key} a file path"
    owner = file_owner(path)
    if owner in mine or (owner is None and out.legacy is not None and out.legacy(path)):
        return None
    if owner is None:
        return (f"the file exists and XDPX did not write it (no record in {MANIFEST}). Choose another path for "
                f"{out.key}, or remove the file yourself if it may go")
    return f"{_written_by(owner, path)}, not {command}. Choose another path for {out.key}"


def _folder_problem(command: str, out: Output, mine: set[str]) -> str | None:
    path = out.path
    if not io.exists(path):
        return None
    if not io.isdir(path):
        owner = file_owner(path)
        return (f"it is a file{f' ({_written_by(owner, path)})' if owner else ''}, not a folder. Choose another "
                f"path for {out.key}")
    # the record, and the writer lock a command holds (or a killed one left) while it writes the folder
    names = [n for n in io.listdir(path) if n not in (MANIFEST, LOCK_FILE)]
    owner = folder_owner(path)
    if not names or owner in mine or (owner is None and out.legacy is not None and out.legacy(path)):
        return None
    fix = f"Choose a new or empty folder for {out.key} (or one that {command} wrote)"
    if owner == "x-train":
        return f"it is a run directory of x-train, not a folder of {command}. {fix}"
    if owner is not None:
        return f"it is a folder of {owner}, not of {command}. {fix}"
    shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
    return f"it holds files XDPX did not write ({shown}). {fix}, or empty it yourself"


def check_outputs(command: str, outputs: Sequence[Output], inputs: Sequence[tuple[str, str]],
                  source: Callable[[str], str]) -> list[str]:
    """Every refusal for one run, one line each: ``source(key)`` names the config file of the key."""
    problems, seen = [], set()
    for out in outputs:
        real = _real(out.path)
        if real in seen:
            problem: str | None = "another output of this run goes there too. Give each output its own path"
        else:
            seen.add(real)
            problem = output_problem(command, out, inputs)
        if problem:
            problems.append(refusal(command, out.key, out.path, problem, source(out.key)))
    return problems


def refusal(command: str, key: str, path: str, problem: str, where: str) -> str:
    """The one message format of every refusal: file, key, command, path, reason and fix."""
    return f"{where}: key '{key}': {command} refuses to write {redact(path)!r}: {problem}"
