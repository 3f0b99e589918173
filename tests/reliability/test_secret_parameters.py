"""Secret query parameters and connection-string fields are masked (docs/io.md, "Credentials").

A signed URL (``?sig=``, ``X-Amz-Signature=``), a ``?password=`` parameter and an Azure connection string's
``;AccountKey=`` carry the credential in the URL itself, not in its user:password part nor in a configured
secret: only the parameter rule of :func:`xdpx.io.redact` masks them. Each is checked on the function, in
free text and in source code (``assignments=False``, what snapshot.zip is written with), and on one real
path: a tiny x-train whose user_dir holds such a URL (snapshot.zip), then x-eval of an SQLite table whose URL
carries all four (stdout, stderr and save_to_file's subset column).
"""

from __future__ import annotations

import json
import sqlite3
import uuid
import zipfile
from pathlib import Path

import pytest
from train_runs import REPO, train_config

from xdpx.cli import run_chain
from xdpx.io import redact

SAMPLE = REPO / "examples/data/sample/reviews"

# (parameter as written in the URL, a URL around it); each value is unique so a leak names its parameter
SECRETS = {name: f"Pl4nted{name.replace('-', '')}{uuid.uuid4().hex[:8]}"
           for name in ("password", "sig", "X-Amz-Signature", "AccountKey")}
URLS = {
    "password": "https://files.example/data/train.txt?user=ann&password={}&format=tsv",
    "sig": "https://acct.blob.core.windows.net/box/train.txt?sv=2022-11-02&sp=r&sig={}",
    "X-Amz-Signature": ("https://bucket.s3.amazonaws.com/train.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256"
                        "&X-Amz-Expires=3600&X-Amz-Signature={}&X-Amz-SignedHeaders=host"),
    "AccountKey": ("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={}==;"
                   "EndpointSuffix=core.windows.net"),
}
# the same URLs as they must read: the value alone replaced, every other parameter kept
MASKED = {
    "password": "https://files.example/data/train.txt?user=ann&password=***&format=tsv",
    "sig": "https://acct.blob.core.windows.net/box/train.txt?sv=2022-11-02&sp=r&sig=***",
    "X-Amz-Signature": ("https://bucket.s3.amazonaws.com/train.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256"
                        "&X-Amz-Expires=3600&X-Amz-Signature=***&X-Amz-SignedHeaders=host"),
    "AccountKey": "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=***;EndpointSuffix=core.windows.net",
}


@pytest.mark.parametrize("name", list(SECRETS))
def test_each_secret_parameter_is_masked_in_text_and_in_code(name):
    url = URLS[name].format(SECRETS[name])
    assert redact(url) == MASKED[name]
    assert redact(f"reading {url} failed") == f"reading {MASKED[name]} failed"
    # source code: assignments are not masked there, the parameter rule alone must do it
    assert redact(f'SOURCE = "{url}"\n', assignments=False) == f'SOURCE = "{MASKED[name]}"\n'
    assert redact({"urls": [url]}) == {"urls": [MASKED[name]]}


def test_parameters_that_hold_no_secret_stay_readable():
    kept = ("https://h/f.txt?max_tokens=5&sort_key=id&tokenizer=bert&keys=3",
            "sqlite:///runs/a.db?table=reviews&columns=review,label")
    for url in kept:
        assert redact(url, assignments=False) == url
    assert redact("https://h/f.txt?sig=&password=") == "https://h/f.txt?sig=&password="  # empty: nothing to hide


def reviews_table(path: Path) -> None:
    rows = [line.split("\t") for line in (SAMPLE / "test.txt").read_text(encoding="utf-8").splitlines()]
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE reviews (id INTEGER PRIMARY KEY, review TEXT, label TEXT)")
        connection.executemany("INSERT INTO reviews VALUES (?, ?, ?)", [(i, t, lab) for i, (t, lab) in enumerate(rows)])


def test_a_signed_url_in_the_user_dir_and_in_an_eval_table_is_masked_everywhere(reviews, tmp_path, capfd):
    project = tmp_path / "project"
    project.mkdir()
    (project / "__init__.py").write_text("")
    sources = {name: URLS[name].format(SECRETS[name]) for name in SECRETS}
    (project / "sources.py").write_text("".join(f"{name.replace('-', '_').upper()} = {url!r}\n"
                                                for name, url in sources.items()))
    config = train_config(tmp_path / "train.json", reviews, tmp_path / "run", user_dir=str(project))
    assert run_chain(["x-train", str(config)]) == 0
    with zipfile.ZipFile(tmp_path / "run" / "snapshot.zip") as archive:
        snapshot_source = archive.read("project/sources.py").decode("utf-8")
    assert snapshot_source == "".join(f"{name.replace('-', '_').upper()} = {MASKED[name]!r}\n" for name in SECRETS)

    database = tmp_path / "tables.db"
    reviews_table(database)
    table = f"sqlite:///{database}?table=reviews&columns=review,label"
    secret_table = table + "".join(f"&{name}={value}" for name, value in SECRETS.items())
    scores = tmp_path / "scores.tsv"
    evaluate = tmp_path / "eval.json"
    evaluate.write_text(json.dumps({"save_dir": str(tmp_path / "run"), "cuda": False, "trust_user_dir": True,
                                    "valid_subset": [secret_table], "save_to_file": str(scores)}))
    assert run_chain(["x-eval", str(evaluate)]) == 0
    captured = capfd.readouterr()
    written = [p for p in (tmp_path / "run").rglob("*") if p.is_file() and p.suffix != ".zip"] + [scores]
    for name, value in SECRETS.items():
        assert value not in captured.out + captured.err, f"{name} printed"
        for path in written:
            assert value.encode() not in path.read_bytes(), f"{name} in {path}"
    masked_table = table + "".join(f"&{name}=***" for name in SECRETS)
    rows = scores.read_text(encoding="utf-8").splitlines()
    assert [row.split("\t")[1] for row in rows[1:]] == [masked_table]
    assert masked_table in captured.out
