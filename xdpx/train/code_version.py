"""The code a run used, by git: commit and dirty flag of the xdpx package, the working directory and
user_dir, wherever they are inside a git work tree. x-train writes it to log.txt and as comments at the
top of args.py, beside snapshot.zip (which holds the source itself)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass

import xdpx


@dataclass(frozen=True)
class GitVersion:
    what: str  # xdpx, working directory, user_dir
    root: str  # the work tree's top folder
    commit: str
    dirty: bool  # tracked files differ from the commit (as `git describe --dirty`)

    def describe(self) -> str:
        return f"{self.what} {self.commit}{' (dirty)' if self.dirty else ''} in {self.root}"


def _git(folder: str, *arguments: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", folder, *arguments], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):  # no git installed, or a hung file system
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_version(folder: str, what: str) -> GitVersion | None:
    """The commit and dirty flag of the git work tree holding ``folder``; None outside one (or without git)."""
    if not os.path.isdir(folder):
        return None
    root = _git(folder, "rev-parse", "--show-toplevel")
    commit = _git(folder, "rev-parse", "HEAD") if root else None
    if not root or not commit:
        return None
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    return GitVersion(what, root, commit, dirty=bool(status))


def code_versions(user_dir: str | None = None) -> list[GitVersion]:
    """One entry per distinct work tree among xdpx's source, the working directory and user_dir."""
    folders = [("xdpx", os.path.dirname(os.path.abspath(xdpx.__file__))), ("working directory", os.getcwd())]
    if user_dir and "://" not in user_dir:
        folders.append(("user_dir", os.path.abspath(os.path.expanduser(user_dir))))
    found: dict[str, GitVersion] = {}
    for what, folder in folders:
        version = git_version(folder, what)
        if version is not None and version.root not in found:
            found[version.root] = version
    return list(found.values())


def args_header(versions: list[GitVersion]) -> str:
    """The comment lines at the top of args.py (comments keep it a plain literal for ast.literal_eval)."""
    if not versions:
        return "# code version: not in a git work tree (see snapshot.zip)\n"
    return "".join(f"# code version: {v.describe()}\n" for v in versions)
