"""Fixtures of the x-eval / x-pred / x-serve tests: real x-prepro output of the committed samples, a
tiny trained cls_cnn run, and a real PostgreSQL server (initdb + pg_ctl on 127.0.0.1, a free port).

CI sets XDPX_REQUIRE_POSTGRES=1 (.ci/run installs PostgreSQL): there a missing server or driver fails
the PostgreSQL test instead of skipping it.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from inference_helpers import PREPRO, train_run, write_json

from xdpx.cli import run_chain


@pytest.fixture(scope="session")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``prepared('reviews_char')`` -> the data_dir of that sample (x-prepro once per session)."""
    done: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in done:
            root = tmp_path_factory.mktemp(name)
            config = write_json(root / "prepro.hjson", {**PREPRO[name], "data_dir": str(root / "data"), "workers": 1})
            assert run_chain(["x-prepro", str(config)]) == 0
            done[name] = root / "data"
        return done[name]

    return get


@pytest.fixture(scope="session")
def cnn_run(prepared: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished cls_cnn run on the review sample (several evaluations, so <best> is not <last>)."""
    return train_run(tmp_path_factory.mktemp("cnn_run"), prepared("reviews_char"))


# ---- PostgreSQL ----------------------------------------------------------------------------------------


def postgres_bin() -> str | None:
    """The folder of initdb and pg_ctl: XDPX_PG_BIN when set (only there), else the PATH or Debian's
    /usr/lib/postgresql/<v>/bin."""
    if os.environ.get("XDPX_PG_BIN"):
        folder = os.environ["XDPX_PG_BIN"]
        return folder if all(os.path.exists(os.path.join(folder, t)) for t in ("initdb", "pg_ctl")) else None
    candidates = []
    found = shutil.which("pg_ctl")
    if found:
        candidates.append(os.path.dirname(os.path.realpath(found)))
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for folder in candidates:
        if folder and all(os.path.exists(os.path.join(folder, tool)) for tool in ("initdb", "pg_ctl")):
            return folder
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _unavailable(reason: str) -> None:
    if os.environ.get("XDPX_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"XDPX_REQUIRE_POSTGRES=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL server of this session on 127.0.0.1 (trust auth): ``postgresql://xdpx@127.0.0.1:PORT/postgres``."""
    folder = postgres_bin()
    if folder is None:
        _unavailable("initdb/pg_ctl are not installed (apt-get install -y postgresql)")
    try:
        import psycopg  # noqa: F401
        import sqlalchemy  # noqa: F401
    except ImportError as e:
        _unavailable(f"the PostgreSQL driver does not import ({e}): pip install -e '.[test]'")
    root = tempfile.mkdtemp(prefix="xdpx-pg-")  # under /tmp: the server's user must reach it
    prefix: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root: run the server as an unprivileged user
        import pwd

        user = "postgres" if any(p.pw_name == "postgres" for p in pwd.getpwall()) else "nobody"
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
        prefix = ["runuser", "-u", user, "--"]
    data, port = os.path.join(root, "data"), free_port()
    run = lambda *cmd: subprocess.run(prefix + list(cmd), check=True, capture_output=True, text=True)  # noqa: E731
    try:
        run(os.path.join(folder, "initdb"), "-D", data, "-U", "xdpx", "--auth=trust", "-E", "UTF8", "--no-sync")
        run(os.path.join(folder, "pg_ctl"), "-D", data, "-l", os.path.join(root, "server.log"), "-w", "-t", "60",
            "-o", f"-h 127.0.0.1 -p {port} -k {root} -F", "start")
    except subprocess.CalledProcessError as e:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"PostgreSQL did not start: {e.cmd}: {e.stderr or e.stdout}", pytrace=False)
    try:
        yield f"postgresql://xdpx@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(prefix + [os.path.join(folder, "pg_ctl"), "-D", data, "-m", "immediate", "stop"],
                       capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
