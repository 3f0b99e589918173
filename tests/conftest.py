"""Session fixtures shared by every test folder: a real S3 endpoint (moto's server on 127.0.0.1, used
through s3fs) and a real PostgreSQL server (initdb + pg_ctl on 127.0.0.1, a free port). Tests that do
not ask for ``s3_endpoint`` / ``s3_root`` / ``postgres_url`` never start them.

CI sets XDPX_REQUIRE_POSTGRES=1 (.ci/run installs PostgreSQL): there a missing server or driver fails
the PostgreSQL tests instead of skipping them. It also sets XDPX_REQUIRE=all: every ``pytest.importorskip``
of an optional package the suite relies on (moto, onnxruntime, transformers, ...) fails instead of
skipping when the package is missing (tests/optional_components.py)."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import optional_components
import pytest

from xdpx.cli import run_chain
from xdpx.io import testing
from xdpx.io.testing import fake_aws_env, free_port, start_moto_server, unavailable, use_s3_endpoint
from xdpx.models import models
from xdpx.utils.cpu_load import usable_cores

BUCKET = "xdpx-io-test"
# every test's pytest.importorskip goes through XDPX_REQUIRE (looked up at call time, so this covers the
# module-level calls of test files collected later too)
pytest.importorskip = optional_components.importorskip


@pytest.fixture(autouse=True)
def forget_test_components() -> Iterator[None]:
    """The faulty_cnn test model (a user_dir loaded in process by tests of several folders) must not stay
    registered for later tests on the same worker (the generated option docs and the batch-invariance list
    check every registered model)."""
    yield
    models._entries.pop("faulty_cnn", None)
    sys.modules.pop("faulty_components", None)


def pytest_configure(config: pytest.Config) -> None:
    optional_components.required_components()  # an unknown name in XDPX_REQUIRE stops the session at once
    share_the_cores()
    if os.environ.get("XDPX_REQUIRE_TF") == "1":  # CI's TensorFlow step: its tests must run, not skip silently
        try:
            import tensorflow  # noqa: F401
        except ImportError as e:
            raise pytest.UsageError(f"XDPX_REQUIRE_TF=1 but tensorflow does not import ({e}); "
                                    "install it with: pip install -e '.[tf]'") from e


def share_the_cores() -> None:
    """In a pytest-xdist worker, torch (and every process a test starts, through OMP_NUM_THREADS) computes on
    the worker's share of the cores: two workers of two threads each on 2 cores spun against each other, and
    tiny models (many small ops, an OpenMP barrier each) ran several times slower (the LSTM-CRF pair of
    tests/matrix: 88 s with 2 threads, 11 s with 1, on a busy machine). Numbers do not change within a run:
    the test process and the processes it starts use the same count. OMP_NUM_THREADS set by the user wins."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if not workers or "OMP_NUM_THREADS" in os.environ:
        return
    import torch

    threads = max(1, usable_cores() // workers)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups off the markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    group_for_workers(items)
    require_tf(items)


def group_for_workers(items: list[pytest.Item]) -> None:
    """pytest-xdist runs the suite on two workers (addopts: -n 2 --dist loadgroup), and a group's tests on
    one worker. A folder whose conftest.py builds session fixtures (a trained model, the Slurm cluster) is
    one group, so each such fixture is built once; the other tests are grouped by file, as xdist's
    loadfile would."""
    tests = Path(__file__).parent
    shared: dict[Path, bool] = {}
    for item in items:
        path = Path(str(item.path))
        folder = path.parent
        if folder not in shared:
            conftest = folder / "conftest.py"
            shared[folder] = folder != tests and conftest.exists() and 'scope="session"' in conftest.read_text()
        group = folder if shared[folder] else path
        item.add_marker(pytest.mark.xdist_group(str(group.relative_to(tests))))


def require_tf(items: list[pytest.Item]) -> None:
    """With XDPX_REQUIRE_TF=1 a run that collected no TF test is an error (TensorFlow's import is checked in
    pytest_configure). In an xdist worker an error here would read as a crash: there pytest's own exit code
    5 (no tests ran) fails the run instead."""
    if os.environ.get("XDPX_REQUIRE_TF") != "1" or "PYTEST_XDIST_WORKER" in os.environ:
        return
    if not any(item.get_closest_marker("tf") for item in items):
        raise pytest.UsageError("XDPX_REQUIRE_TF=1 but no test marked tf was selected")


@pytest.fixture(autouse=True)
def keep_torch_threads() -> Iterator[None]:
    """Give torch its thread count back after each test. x-serve's ``threads`` (load_predictor,
    load_onnx_predictor) sets the count for the whole process, as a server wants; in the pytest process it
    made later in-process trainings use 1 thread, and a reduction split over another number of threads
    rounds differently: last-bit different weights than the same training in a fresh process."""
    import torch

    threads = torch.get_num_threads()
    yield
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def keep_the_training_loop() -> Iterator[None]:
    """Give the Trainer class its own methods back after each test. The test user_dirs (tests/submit's
    slow_updates, dying_rank) wrap Trainer methods when they are imported, and x-submit imports a config's
    user_dir in the test's own process: a wrapper left behind slowed every later in-process training of the
    session (0.5 s of sleep per update made tests/train, tune and viz ten times slower)."""
    from xdpx.train.loop import Trainer

    methods = dict(vars(Trainer))
    yield
    for name in set(vars(Trainer)) - set(methods):
        delattr(Trainer, name)
    for name, value in methods.items():
        if vars(Trainer).get(name) is not value:
            setattr(Trainer, name, value)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A moto S3 server for the session, with fake AWS credentials and ``s3://xdpx-io-test`` created.

    ``s3://`` paths of this process point at it (``xdpx.io.set_storage_options``); a subprocess needs the
    endpoint passed on, e.g. in an io config file named by ``XDPX_IO_CONFIG`` (see docs/io.md).
    """
    pytest.importorskip("s3fs", reason="s3 tests need s3fs (pip install -e '.[test]')")
    pytest.importorskip("moto.server", reason="s3 tests need moto[server] (pip install -e '.[test]')")
    with pytest.MonkeyPatch.context() as mp:
        for name, value in fake_aws_env().items():
            mp.setenv(name, value)
        server, endpoint = start_moto_server()
        try:
            use_s3_endpoint(endpoint, BUCKET)
            yield endpoint
        finally:
            testing.current_endpoint = None
            server.stop()


@pytest.fixture
def s3_root(s3_endpoint: str) -> str:
    """A fresh prefix in the test bucket, so tests never see each other's objects."""
    return f"s3://{BUCKET}/{uuid.uuid4().hex[:10]}"


REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def reviews(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """x-prepro of examples/data/sample/reviews (char_zh, own vocabulary), once per test session."""
    root = tmp_path_factory.mktemp("reviews")
    config = root / "prepro.hjson"
    config.write_text(json.dumps({
        "__parent__": str(REPO / "examples/prepro/reviews_char"),
        "data_source": str(REPO / "examples/data/sample/reviews"), "data_dir": str(root / "data"), "workers": 1,
    }))
    assert run_chain(["x-prepro", str(config)]) == 0
    return root / "data"


# ---- PostgreSQL (x-pred's SQL sources, x-tune's shared studies) ----------------------------------------------------------------------------------------


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


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL server of this session on 127.0.0.1 (trust auth): ``postgresql://xdpx@127.0.0.1:PORT/postgres``."""
    folder = postgres_bin()
    if folder is None:
        unavailable("XDPX_REQUIRE_POSTGRES", "initdb/pg_ctl are not installed (apt-get install -y postgresql)")
    try:
        import psycopg  # noqa: F401
        import sqlalchemy  # noqa: F401
    except ImportError as e:
        unavailable("XDPX_REQUIRE_POSTGRES", f"the PostgreSQL driver does not import ({e}): pip install -e '.[test]'")
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
