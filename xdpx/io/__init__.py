"""All file access of XDPX: one API for local paths and object stores, over fsspec.

Any path may be local (``data/x.txt``, ``~/runs``, ``file:///tmp/x``) or remote (``s3://``, ``oss://``,
``gs://``, ``http(s)://`` read-only, ``memory://`` for tests). Writes through :func:`open` are atomic;
copies stream in bounded chunks with a progress bar for large files; :func:`cached_path` keeps fresh local
copies of remote files. Storage options and credentials: :func:`configure`, :func:`set_storage_options`,
env ``XDPX_IO_CONFIG``, or each backend's standard mechanism. See docs/io.md.

Importing this package loads no backend (fsspec, s3fs, tqdm are imported on first use).
"""

from __future__ import annotations

from .cache import cache_dir, cached_path
from .credentials import configure, filesystem, redact, reset_storage_options, set_storage_options
from .ops import (
    exists,
    glob,
    is_writable,
    isdir,
    isfile,
    last_modified,
    listdir,
    makedirs,
    md5,
    output_path_problem,
    remove,
    rmtree,
    size,
    stat,
)
from .paths import abspath, basename, dirname, is_remote, join, protocol_of
from .progress import PROGRESS_THRESHOLD, set_progress
from .retry import StoreUnavailableError
from .streams import open
from .transfer import copy, copytree, move

__all__ = [
    "PROGRESS_THRESHOLD",
    "StoreUnavailableError",
    "abspath",
    "basename",
    "cache_dir",
    "cached_path",
    "configure",
    "copy",
    "copytree",
    "dirname",
    "exists",
    "filesystem",
    "glob",
    "is_remote",
    "is_writable",
    "isdir",
    "isfile",
    "join",
    "last_modified",
    "listdir",
    "makedirs",
    "md5",
    "move",
    "open",
    "output_path_problem",
    "protocol_of",
    "redact",
    "remove",
    "reset_storage_options",
    "rmtree",
    "set_progress",
    "set_storage_options",
    "size",
    "stat",
]
