"""x-tune's study folder holds one study: ``.xdpx-study`` records the storage and study name of the first
x-tune worker that takes the folder (created once, atomically: :func:`xdpx.io.writer_lock.create_once`), and a
config naming another study or storage for that folder is refused before any work.

The folder itself is not locked: several workers of one study share it (their storage lock orders their
writes), while another study would rewrite its results.tsv, best_config.hjson and trial_N run directories."""

from __future__ import annotations

import json

from .credentials import redact
from .paths import join
from .writer_lock import FolderLocked, create_once, read_record

STUDY_FILE = ".xdpx-study"


def study_problem(folder: str, identity: dict[str, str]) -> str | None:
    """Why a study folder must not take the outputs of the study ``identity`` (storage, study), or None.

    Workers of one study share its folder (its storage lock orders their writes); another study would
    rewrite its results.tsv and best_config.hjson and its trial_N run directories."""
    path = join(folder, STUDY_FILE)
    text = read_record(path)
    if text is None:
        return None
    try:
        there = json.loads(text)
    except ValueError:
        there = None
    if not isinstance(there, dict):
        return f"{redact(path)} cannot be read. Remove it if the folder holds one study only"
    theirs = {key: there.get(key) for key in identity}
    if theirs == identity:
        return None
    return (f"it holds the outputs of study {there.get('study')!r} of storage {there.get('storage')}: x-tune "
            f"workers share a folder only within one study (this config: study {identity['study']!r} of "
            f"storage {identity['storage']}). Choose another save_dir, or the study_name and storage of that study")


def claim_study(folder: str, identity: dict[str, str], where: str) -> None:
    """Record which study writes ``folder`` (created once, atomically); refuse another study."""
    problem = study_problem(folder, identity)
    if problem is None and not create_once(join(folder, STUDY_FILE), json.dumps(identity, indent=1) + "\n"):
        problem = study_problem(folder, identity)  # a worker of another study created it a moment ago
    if problem is not None:
        raise FolderLocked(f"{where}: {problem}")
