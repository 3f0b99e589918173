"""Credentials never reach a file, a record or a log that XDPX writes (docs/io.md, "Credentials").

A unique password is planted in every option that may carry one: an SQL table of x-eval's valid_subset and
of x-pred's predict_file_map (the real PostgreSQL server), mlflow_tracking_uri (an MLflow store on that
server), x-tune's storage, and the s3 storage options (the moto server) that x-prepro's remote data_source,
x-pred's remote input and output are read and written with. Then every file under the run directory, the
outputs, the MLflow artifacts, the study, the MLflow params and tags, and everything printed (stdout and
stderr of this process and its children, at the file descriptors) is searched for each password, while
the commands still work with it (the tables are read, the runs logged, the trials run).

Before :func:`xdpx.io.redact` was applied where XDPX writes, x-eval printed the SQL URL with its password
and wrote it into save_to_file's subset column, x-pred printed it, and args.py / starter_config.hjson (also
uploaded as MLflow artifacts) and the --dry listings held mlflow_tracking_uri in clear.
"""

from __future__ import annotations

import json
import os
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from train_runs import REPO, TINY

from xdpx import io as xio
from xdpx.cli import run_chain
from xdpx.io import credentials

sqlalchemy = pytest.importorskip("sqlalchemy")
pytest.importorskip("mlflow")

SAMPLE = REPO / "examples/data/sample/reviews"
PASSWORDS = {name: f"Pl4nted-{name}-{uuid.uuid4().hex[:10]}"
             for name in ("eval_sql", "pred_sql", "mlflow", "s3", "tune_storage", "tune_mlflow")}


def with_password(url: str, password: str, database: str | None = None) -> str:
    """``postgresql://xdpx@host:port/db`` -> ``postgresql+psycopg://xdpx:PASSWORD@host:port/DATABASE``
    (the test server trusts every connection: any password is accepted)."""
    base, db = url.rsplit("/", 1)
    return base.replace("postgresql://xdpx@", f"postgresql+psycopg://xdpx:{password}@") + "/" + (database or db)


def new_database(postgres_url: str) -> str:
    import psycopg

    name = f"secrets_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    return name


def fill_reviews_table(url: str, name: str) -> None:
    rows = [line.split("\t") for line in (SAMPLE / "test.txt").read_text(encoding="utf-8").splitlines()]
    engine = sqlalchemy.create_engine(url)
    metadata = sqlalchemy.MetaData()
    table = sqlalchemy.Table(name, metadata,
                             sqlalchemy.Column("id", sqlalchemy.Integer, primary_key=True, autoincrement=False),
                             sqlalchemy.Column("review", sqlalchemy.Text), sqlalchemy.Column("label", sqlalchemy.Text))
    metadata.create_all(engine)
    with engine.begin() as connection:
        connection.execute(table.insert(), [{"id": i, "review": t, "label": label} for i, (t, label) in enumerate(rows)])
    engine.dispose()


def write(path: Path, config: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, ensure_ascii=False, indent=1), encoding="utf-8")
    return path


def leaks(data: bytes, where: str) -> list[str]:
    return [f"{name} in {where}" for name, password in PASSWORDS.items() if password.encode() in data]


def leaks_in_tree(root: Path) -> list[str]:
    """Every file under ``root``; zip archives (snapshot.zip, .pt files) member by member."""
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        found += leaks(data, str(path))
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                for member in archive.namelist():
                    found += leaks(archive.read(member), f"{path}!{member}")
    return found


def leaks_in_prefix(prefix: str) -> list[str]:
    found = []
    for path in xio.glob(f"{prefix}/**"):
        if xio.isfile(path):
            with xio.open(path, "rb") as f:
                found += leaks(f.read(), path)
    return found


@pytest.fixture
def s3_secret(s3_root: str) -> Iterator[str]:
    """The s3 storage options hold a planted secret (moto accepts any) for this test only."""
    before = credentials.storage_options("s3").get("secret")
    xio.set_storage_options("s3", secret=PASSWORDS["s3"])
    try:
        yield s3_root
    finally:
        xio.set_storage_options("s3", secret=before)


def test_no_password_reaches_a_file_or_a_log(reviews, postgres_url, s3_secret, tmp_path, monkeypatch, capfd):
    s3_root = s3_secret
    inputs, out, cwd = tmp_path / "inputs", tmp_path / "out", tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)  # MLflow keeps the artifacts of a database store in ./mlruns
    tables = new_database(postgres_url)
    fill_reviews_table(postgres_url.rsplit("/", 1)[0] + f"/{tables}", "reviews")
    eval_url = with_password(postgres_url, PASSWORDS["eval_sql"], tables) + "?table=reviews&columns=review,label"
    pred_url = with_password(postgres_url, PASSWORDS["pred_sql"], tables) + "?table=reviews&columns=review"
    mlflow_url = with_password(postgres_url, PASSWORDS["mlflow"], new_database(postgres_url))

    # x-prepro of raw files on the object store (data_source), read with the planted s3 secret
    for name in ("train.txt", "dev.txt", "test.txt"):
        xio.copy(str(SAMPLE / name), f"{s3_root}/raw/{name}")
    prepro = write(inputs / "prepro.hjson", {"__parent__": str(REPO / "examples/prepro/reviews_char"),
                                             "data_source": f"{s3_root}/raw", "data_dir": str(out / "data"),
                                             "workers": 1})
    assert run_chain(["x-prepro", str(prepro)]) == 0

    # x-train with MLflow on PostgreSQL; the config lives in the user_dir, so snapshot.zip keeps a copy of it
    project = tmp_path / "project"
    project.mkdir()
    (project / "__init__.py").write_text("")
    train = write(project / "train.hjson", {
        "__parent__": "${data_dir}/meta", "data_dir": str(reviews), "save_dir": str(out / "run"), **TINY,
        "user_dir": str(project), "callbacks": ["mlflow"], "mlflow_tracking_uri": mlflow_url})
    assert run_chain(["x-train", str(train), "--dry"]) == 0
    assert run_chain(["x-train", str(train)]) == 0

    # x-eval of a split and the SQL table; x-pred of the table and of a file on the object store
    xio.copy(str(SAMPLE / "test.txt"), f"{s3_root}/new/test.txt")
    consent = {"save_dir": str(out / "run"), "cuda": False, "trust_user_dir": True}
    evaluate = write(inputs / "eval.hjson", {**consent, "valid_subset": ["dev", eval_url],
                                             "save_to_file": str(out / "scores.tsv")})
    predict = write(inputs / "pred.hjson", {**consent, "predict_file_map": {
        pred_url: str(out / "table.pred.tsv"), f"{s3_root}/new/test.txt": f"{s3_root}/out/test.pred.tsv"}})
    for command, config in (("x-eval", evaluate), ("x-pred", predict)):
        assert run_chain([command, str(config), "--dry"]) == 0
        assert run_chain([command, str(config)]) == 0
    assert run_chain(["x-eval", str(evaluate)]) == 0  # save_mode a: the rows added to the file's

    captured = capfd.readouterr()
    printed = captured.out + captured.err
    found = leaks(printed.encode(), "stdout/stderr") + leaks_in_tree(out) + leaks_in_tree(cwd)
    found += leaks_in_prefix(f"{s3_root}/out")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(mlflow_url)
    runs = client.search_runs([client.get_experiment_by_name("xdpx").experiment_id])
    assert len(runs) == 1
    stored = json.dumps({"params": runs[0].data.params, "tags": runs[0].data.tags})
    found += leaks(stored.encode(), "the MLflow run's params and tags")
    assert found == []

    # ... while every command worked with the credentials, and shows where they were
    assert "xdpx:***@127.0.0.1" in (out / "run" / "args.py").read_text()
    assert "note: mlflow_tracking_uri hold(s) a credential" in (out / "run" / "log.txt").read_text()
    rows = (out / "scores.tsv").read_text().splitlines()
    assert [row.split("\t")[1] for row in rows[1:]] == ["dev", eval_url.replace(PASSWORDS["eval_sql"], "***")] * 2
    assert len((out / "table.pred.tsv").read_text().splitlines()) == 61
    assert "args.py" in {a.path.rsplit("/", 1)[-1] for a in client.list_artifacts(runs[0].info.run_id, "run")}
    assert runs[0].data.params["user_dir"] == str(project)
    assert (out / "data" / "meta.hjson").exists()


def test_a_reload_from_args_py_connects_without_the_masked_password(monkeypatch):
    """What args.py gives back is masked: where it is used to connect, the password comes from the process
    that handed it down (x-tune) or, without one, from the library's own place (no password in the URL)."""
    masked = "postgresql+psycopg://xdpx:***@db.example:5432/mlflow"
    monkeypatch.delenv(credentials.HANDOFF_ENV, raising=False)
    assert credentials.unmask(masked) == "postgresql+psycopg://xdpx@db.example:5432/mlflow"  # libpq: PGPASSWORD
    real = masked.replace("***", PASSWORDS["mlflow"])
    credentials.hand_down({"mlflow_tracking_uri": real, "lr": 0.1})
    assert credentials.unmask(masked) == real and credentials.redact(real) == masked


def test_x_tune_trials_work_and_nothing_it_writes_holds_a_password(reviews, postgres_url, tmp_path, monkeypatch,
                                                                   capfd):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv(credentials.HANDOFF_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    storage = with_password(postgres_url, PASSWORDS["tune_storage"], new_database(postgres_url))
    mlflow_url = with_password(postgres_url, PASSWORDS["tune_mlflow"], new_database(postgres_url))
    inputs = tmp_path / "inputs"
    write(inputs / "train.hjson", {"__parent__": "${data_dir}/meta", "data_dir": str(reviews),
                                   "save_dir": str(tmp_path / "unused"), **TINY, "callbacks": ["mlflow"],
                                   "mlflow_tracking_uri": mlflow_url})
    write(inputs / "space.hjson", {"learning_rate": {"type": "categorical", "values": [3e-3]}})
    study = tmp_path / "study"
    tune = write(inputs / "tune.hjson", {"space_config": "./space", "base_config": "./train", "save_dir": str(study),
                                         "tuner": "random", "assess_start_step": 3, "assess_interval": 3,
                                         "parallel_runs": 1, "max_trials": 1, "storage": storage})
    assert run_chain(["x-tune", str(tune), "--dry"]) == 0
    assert run_chain(["x-tune", str(tune)]) == 0
    captured = capfd.readouterr()
    found = leaks((captured.out + captured.err).encode(), "stdout/stderr") + leaks_in_tree(study)
    assert found == []
    # the trial logged to MLflow with the password x-tune handed down (its config holds it masked)
    assert "xdpx:***@" in (study / "configs" / "trial_0.hjson").read_text()
    from mlflow.tracking import MlflowClient

    client = MlflowClient(mlflow_url)
    runs = client.search_runs([client.get_experiment_by_name("xdpx").experiment_id])
    assert len(runs) == 1 and runs[0].data.tags["xdpx.status"] == "done"
    assert (study / "best_config.hjson").exists()
