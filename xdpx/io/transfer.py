"""copy / move / copytree across filesystems: local<->remote, remote<->remote, local<->local.

Every file lands atomically (local: temp + rename; remote: one put or a server-side copy), bytes stream in
bounded chunks, and transfers of PROGRESS_THRESHOLD or more show one byte progress bar.
"""

from __future__ import annotations

import builtins
import os
from typing import Any

from . import paths
from .atomic import commit_local, local_temp_for, open_local_writer
from .backends import get_file, put_file, read_kwargs
from .credentials import filesystem
from .errors import path_error, path_errors
from .ops import isdir, makedirs, remove, rmtree, stat
from .paths import PathLike, check_writable_scheme, is_remote, local_path, to_str
from .progress import CHUNK_SIZE, make_bar
from .streams import open as _open


def _stream(src: str, dst: str, bar: Any) -> None:
    """Chunked copy through this process: used when no backend call does the job directly."""
    if is_remote(src):
        fs, p = filesystem(src)
        with path_errors(src):
            fin: Any = fs.open(p, "rb", **read_kwargs(fs))
    else:
        fin = builtins.open(local_path(src), "rb")
    with fin, _open(dst, "wb", progress=False) as fout:
        while chunk := fin.read(CHUNK_SIZE):
            fout.write(chunk)
            bar.update(len(chunk))


def _copy_file(src: str, dst: str, bar: Any, size: int | None) -> None:
    src_remote, dst_remote = is_remote(src), is_remote(dst)
    if src_remote and dst_remote:
        sfs, sp = filesystem(src)
        dfs, dp = filesystem(dst)
        if sfs is dfs:  # same backend and options: let the server copy (no bytes through here)
            with path_errors(src):
                sfs.copy(sp, dp)
            bar.update(size or 0)
        else:
            _stream(src, dst, bar)
    elif dst_remote:
        put_file(local_path(src), dst, bar, size)
    elif src_remote:
        target = local_path(dst)
        tmp = local_temp_for(target)
        try:
            get_file(src, tmp, bar, size)
            commit_local(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    else:
        with builtins.open(local_path(src), "rb") as fin, open_local_writer(local_path(dst), "wb") as fout:
            while chunk := fin.read(CHUNK_SIZE):
                fout.write(chunk)
                bar.update(len(chunk))


def _file_target(src: str, dst: str) -> str:
    # Like `cp`: a destination that is a directory (or ends with '/') receives the file under its name.
    if dst.endswith("/") or (not dst.endswith("://") and isdir(dst)):
        return paths.join(dst, paths.basename(src.rstrip("/")))
    return dst


def copy(src: PathLike, dst: PathLike, progress: bool | None = None) -> str:
    """Copy a file to ``dst`` (into it if ``dst`` is a directory); returns the destination file path."""
    s, d = to_str(src), check_writable_scheme(dst)
    meta = stat(s)
    if meta["type"] == "directory":
        raise path_error(IsADirectoryError, s, "use copytree for directories")
    target = _file_target(s, d)
    size = meta.get("size")
    bar = make_bar(size, paths.basename(s), progress)
    try:
        _copy_file(s, target, bar, size)
    finally:
        bar.close()
    return target


def _walk(url: str) -> tuple[list[tuple[str, int]], list[str]]:
    """(files as (relative path, size), relative dirs) under a directory; relative paths use '/'."""
    if not is_remote(url):
        root = local_path(url)
        files, dirs = [], []
        for cur, dnames, fnames in os.walk(root):
            rel = os.path.relpath(cur, root).replace(os.sep, "/")
            prefix = "" if rel == "." else rel + "/"
            dirs += [prefix + d for d in dnames]
            files += [(prefix + f, os.path.getsize(os.path.join(cur, f))) for f in fnames]
        return sorted(files), sorted(dirs)
    fs, p = filesystem(url)
    with path_errors(url):
        found = fs.find(p, withdirs=True, detail=True)
    base = p.rstrip("/") + "/"
    files, dirs = [], []
    for name, meta in found.items():
        if not name.startswith(base):
            continue  # the root itself
        rel = name[len(base) :].rstrip("/")
        if not rel:
            continue
        if meta.get("type") == "directory":
            dirs.append(rel)
        else:
            files.append((rel, int(meta.get("size") or 0)))
    return sorted(files), sorted(dirs)


def copytree(src: PathLike, dst: PathLike, progress: bool | None = None) -> str:
    """Copy a directory recursively to ``dst`` (merged into ``dst`` if it exists); returns ``dst``."""
    s, d = to_str(src), check_writable_scheme(dst)
    if stat(s)["type"] != "directory":
        raise path_error(NotADirectoryError, s, "use copy for files")
    files, dirs = _walk(s)
    if not is_remote(d):  # object stores have no empty directories to recreate
        makedirs(d)
        for rel in dirs:
            makedirs(paths.join(d, *rel.split("/")))
    total = sum(n for _, n in files)
    bar = make_bar(total, paths.basename(s.rstrip("/")) + "/", progress)
    try:
        for rel, n in files:
            parts = rel.split("/")
            _copy_file(paths.join(s, *parts), paths.join(d, *parts), bar, n)
    finally:
        bar.close()
    return d


def move(src: PathLike, dst: PathLike, progress: bool | None = None) -> str:
    """Move a file (into ``dst`` if that is a directory) or a directory (to ``dst``, merged if it exists).

    Local to local renames when possible; otherwise copy, then delete the source.
    """
    s, d = check_writable_scheme(src), check_writable_scheme(dst)  # the source is deleted too
    src_is_dir = stat(s)["type"] == "directory"
    target = d if src_is_dir else _file_target(s, d)
    if not is_remote(s) and not is_remote(target):
        ls, lt = local_path(s), local_path(target)
        if not (src_is_dir and os.path.exists(lt)):
            os.makedirs(os.path.dirname(os.path.abspath(lt)), exist_ok=True)
            try:
                with path_errors(s):
                    os.replace(ls, lt)
                return target
            except OSError:
                if not os.path.exists(ls):
                    raise
                # another device, or a non-empty target directory: fall through to copy + delete
    if is_remote(s) and not src_is_dir:
        sfs, sp = filesystem(s)
        if is_remote(target) and filesystem(target)[0] is sfs:
            with path_errors(s):
                sfs.mv(sp, filesystem(target)[1])
            return target
    if src_is_dir:
        copytree(s, target, progress)
        rmtree(s)
    else:
        copy(s, target, progress)
        remove(s)
    return target
