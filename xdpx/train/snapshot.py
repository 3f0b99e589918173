"""snapshot.zip: the source of the xdpx package (and user_dir) that a run actually used.

Only source and config text (.py, .hjson, .json, .txt, .md, .toml, .cfg); no caches, no hidden files,
nothing that looks like a credential (names with key/secret/token/credential/password, .pem, .env, the
file named by XDPX_IO_CONFIG); files over 1 MB are skipped and the archive stops at 20 MB. A credential
inside a kept file (a config of user_dir with a database URL and its password) is stored masked
(:func:`xdpx.io.redact`).
"""

from __future__ import annotations

import io as stdio
import os
import re
import zipfile

import xdpx
from xdpx import io
from xdpx.io.credentials import redact

SOURCE_SUFFIXES = (".py", ".hjson", ".json", ".txt", ".md", ".toml", ".cfg")
MAX_FILE_BYTES = 1 << 20
MAX_TOTAL_BYTES = 20 << 20
_SECRET_NAME = re.compile(r"key|secret|token|credential|passw|\.pem$|\.env$|netrc", re.IGNORECASE)


def _wanted(path: str, name: str, secret_files: set[str]) -> bool:
    return (name.endswith(SOURCE_SUFFIXES) and not name.startswith(".") and not _SECRET_NAME.search(name)
            and os.path.realpath(path) not in secret_files and os.path.getsize(path) <= MAX_FILE_BYTES)


def build_snapshot(folders: list[str]) -> tuple[bytes, int]:
    """A zip of the source files under ``folders`` (each stored under its own name): (bytes, file count)."""
    secret_files = {os.path.realpath(p) for p in [os.environ.get("XDPX_IO_CONFIG", "")] if p}
    buffer = stdio.BytesIO()
    total = count = 0
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for folder in folders:
            root = os.path.dirname(os.path.abspath(folder))
            for directory, subdirs, files in os.walk(folder):
                subdirs[:] = sorted(d for d in subdirs if not d.startswith((".", "__pycache__")))
                for name in sorted(files):
                    path = os.path.join(directory, name)
                    if not _wanted(path, name, secret_files):
                        continue
                    size = os.path.getsize(path)
                    if total + size > MAX_TOTAL_BYTES:
                        return buffer.getvalue(), count
                    _add(archive, path, os.path.relpath(path, root))
                    total, count = total + size, count + 1
    return buffer.getvalue(), count


def _add(archive: zipfile.ZipFile, path: str, name: str) -> None:
    """The file as it is, or with its credentials masked (URL passwords, secret parameters, known
    secrets; assignments such as ``token: str`` are code here, not secrets)."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        archive.write(path, name)
        return
    masked = redact(text, assignments=False)
    if masked == text:
        archive.write(path, name)
    else:
        archive.writestr(name, masked.encode("utf-8"), zipfile.ZIP_DEFLATED)


def write_snapshot(save_dir: str, user_dir: str | None = None) -> int:
    folders = [os.path.dirname(os.path.abspath(xdpx.__file__))]
    if user_dir and not io.is_remote(user_dir) and os.path.isdir(user_dir):
        folders.append(user_dir)
    data, count = build_snapshot(folders)
    with io.open(io.join(save_dir, "snapshot.zip"), "wb") as f:
        f.write(data)
    return count
