"""What x-train checks of an online distillation teacher (``task: distill, teacher: ...``) before any work,
with and without ``--dry``, reading files only (no torch, no model built):

- the teacher is an x-train run, not an x-prepro data_dir (which holds args.py too, beside meta.hjson);
- the checkpoint it will load exists (``<best>``, else ``<last>``, or the file given) and is whole: a
  torch.save file is a zip archive whose directory is at its end, so a cut file has none;
- it predicts what the student does: the same kind of targets (classes, label sets, tags per token,
  scores) and the same labels in the same order (each run's target_map.txt);
- the student's batches are its input (same processor fields, tokenizer, max_len, lower and vocabulary),
  or the student's data keeps the raw texts (``keep_texts``) for the teacher's own processor.

Each problem is one line naming the key ``teacher`` and what differs; x-train reports them with exit 2.
"""

from __future__ import annotations

import zipfile
from typing import Any

from xdpx import io
from xdpx.data.composition import processor_class
from xdpx.data.dictionary import read_vocab
from xdpx.data.processing import VOCAB_FILE, find_target_map
from xdpx.errors import UserError
from xdpx.models.checkpoints import BEST, LAST, CheckpointError, read_index, resolve_checkpoint
from xdpx.registry import RegistryError
from xdpx.tasks.teacher import ARGS_FILE, run_dir_of, teacher_args

META_FILE = "meta.hjson"  # what x-prepro writes into a data_dir (an x-train run has none)


def teacher_problems(args: Any) -> list[str]:
    """One line per problem of the student's ``teacher``; [] without an online teacher."""
    if args.get("task") != "distill" or not args.get("teacher"):
        return []
    path = args.teacher
    key = f"{args.source('teacher')}: key 'teacher'"
    run_dir, checkpoint = run_dir_of(path)
    if io.exists(io.join(run_dir, META_FILE)):
        return [f"{key}: {path!r} is a data directory of x-prepro (it holds {META_FILE}), not an x-train run: "
                "give the teacher run's save_dir"]
    if not io.exists(io.join(run_dir, ARGS_FILE)):
        return []  # the option's own rule says what a teacher is
    try:
        teacher = teacher_args(path)
    except (SyntaxError, ValueError, UserError) as e:
        return [f"{key}: {io.join(run_dir, ARGS_FILE)} cannot be read ({type(e).__name__}): is {run_dir!r} "
                "an x-train run?"]
    problems = [f"{key}: {p}" for p in (checkpoint_problem(run_dir, checkpoint),) if p]
    try:
        found = label_problem(teacher, args, run_dir) or input_problem(teacher, args, run_dir)
    except RegistryError as e:  # a component of the teacher's own user_dir, not imported here
        found = f"teacher run {run_dir!r}: {e} (load the teacher's components with user_dir)"
    if found:
        problems.append(f"{key}: {found}")
    return problems


def checkpoint_problem(run_dir: str, checkpoint: str | None) -> str | None:
    """Why the teacher's checkpoint (the file given, else <best>, else <last>) cannot be loaded, or None."""
    if checkpoint is not None:
        try:
            return whole_problem(resolve_checkpoint(checkpoint))
        except CheckpointError as e:
            return f"{e}: give a checkpoint file of the teacher run, or the run directory"
    for alias in (BEST, LAST):
        try:
            return whole_problem(resolve_checkpoint(io.join(run_dir, alias)))
        except CheckpointError:
            continue
    named = sorted({name for k, name in read_index(run_dir).items() if k in ("best", "last") and isinstance(name, str)})
    missing = [name for name in named if not io.exists(io.join(run_dir, name))]
    if missing:
        return (f"{run_dir!r} lacks {', '.join(missing)}, the checkpoint(s) its checkpoints.json names for <best> / "
                "<last>, and holds no other: copy the teacher run whole, or give one of its checkpoint files")
    return f"{run_dir!r} holds no checkpoint (checkpoint-<step>.pt): train the teacher first"


def whole_problem(path: str) -> str | None:
    """Whether a checkpoint file is whole: torch.save's zip archive keeps its directory at the end, so a
    file cut anywhere lacks it (a legacy, non-zip file is checked when it is loaded)."""
    with io.open(path, "rb") as f:
        head = f.read(4)
        if not head:
            return f"{path} is empty: copy the teacher's checkpoint again"
        if head != b"PK\x03\x04":
            return None
        f.seek(0)
        try:
            with zipfile.ZipFile(f) as archive:
                archive.namelist()
        except (zipfile.BadZipFile, EOFError, OSError) as e:
            return f"{path} is truncated or corrupt ({e}): copy the teacher's checkpoint again"
    return None


def target_kind(args: Any) -> str:
    """What one sample's logits are: per-token tags, a label set, a score or one class."""
    if getattr(processor_class(args), "target_field", None):
        return "tags per token (NER)"
    return {"multilabel": "label sets (multi-label)", "regression": "scores (regression)"}.get(
        str(args.get("target_type")), "one class per sample")


def label_problem(teacher: Any, student: Any, run_dir: str) -> str | None:
    """Why the teacher's logits do not score the student's labels, or None."""
    theirs, ours = target_kind(teacher), target_kind(student)
    if theirs != ours:
        return (f"the label set differs: teacher {run_dir!r} predicts {theirs}, the student {ours}: its logits "
                "cannot be the student's soft targets; distil from a teacher of the student's kind of targets")
    # a run's own copy of the map, else its data_dir's
    their_map = find_target_map(run_dir, teacher.get("data_dir"))
    our_map = find_target_map(student.data_dir, student.get("data_dir"))
    if their_map and our_map and their_map[1] != our_map[1]:
        return (f"the label set differs: teacher {their_map[1][:10]} ({their_map[0]}), student {our_map[1][:10]} "
                f"({our_map[0]}): distillation needs the same labels in the same order; preprocess the student's "
                f"data with target_map_file: {their_map[0]}")
    return None


def vocab_of(folder: str | None) -> tuple[str, list[str]] | None:
    """(path, tokens) of a folder's vocab.txt; None without one."""
    if not folder or not io.exists(io.join(folder, VOCAB_FILE)):
        return None
    path = io.join(folder, VOCAB_FILE)
    return path, read_vocab(path)


def input_problem(teacher: Any, student: Any, run_dir: str) -> str | None:
    """Why the teacher cannot read the student's batches, when the student's data keeps no raw texts."""
    theirs, ours = processor_class(teacher), processor_class(student)
    if theirs.num_texts != ours.num_texts:
        return (f"teacher {run_dir!r} reads {theirs.num_texts} text(s) per sample (processor {teacher.processor}), "
                f"the student {ours.num_texts} (processor {student.processor})")
    if student.get("keep_texts"):
        return None  # the teacher's own processor encodes the raw texts the student's data keeps
    differs = [f"the processor fields (teacher {', '.join(theirs.fields)}, student {', '.join(ours.fields)})"] \
        if tuple(theirs.fields) != tuple(ours.fields) else []
    differs += [f"{name} (teacher {teacher.get(name)!r}, student {student.get(name)!r})"
                for name in ("tokenizer", "max_len", "lower") if teacher.get(name) != student.get(name)]
    their_vocab = vocab_of(run_dir) or vocab_of(teacher.get("data_dir"))
    our_vocab = vocab_of(student.data_dir)
    if their_vocab and our_vocab and their_vocab[1] != our_vocab[1]:
        sizes = [len([t for t in v[1] if t]) for v in (their_vocab, our_vocab)]
        differs.append(f"the vocabulary (teacher {sizes[0]} tokens in {their_vocab[0]}, student {sizes[1]} in "
                       f"{our_vocab[0]}: another threshold, nwords or data?)")
    if not differs:
        return None
    fix = f", or with the teacher's vocabulary (vocab_file: {their_vocab[0]})" if their_vocab and \
        len(differs) == 1 and differs[0].startswith("the vocabulary") else ""
    return (f"the student's batches are not the teacher's input, as these differ: {'; '.join(differs)}; and the "
            "student's data keeps no raw texts for the teacher to encode itself. "
            f"Preprocess the student's data with teacher_logits: true and keep_texts: true{fix}")
