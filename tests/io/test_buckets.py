"""Per-bucket endpoints and credentials from the buckets file (XDPX_BUCKETS): two S3 buckets on two moto
servers with different credentials, a missing entry, the file's permission rule, OSS profiles, and a
run whose files never hold the secrets."""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path

import boto3
import pytest

import xdpx.io as xio
from xdpx.cli import run_chain
from xdpx.io import credentials
from xdpx.io.buckets import BucketsError
from xdpx.io.cli import main as x_io
from xdpx.io.testing import FAKE_KEY, FAKE_SECRET

ONE_ID, ONE_PW = "one-key-id-5521", "one-pass-9917-zq"  # from variables whose names look harmless
TWO_ID, TWO_SECRET = "two-key-id-7730", "two-inline-4480-xw"  # written in the (private) file
REVIEWS = Path(__file__).resolve().parents[2] / "examples" / "data" / "sample" / "reviews"


class RecordingProxy:
    """A TCP forwarder to the moto server that keeps every byte clients send: which endpoint a request
    went to, and which access key id signed it (``Credential=KEY/...`` in the Authorization header)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = ("127.0.0.1", int(upstream.rsplit(":", 1)[1]))
        self.sent = bytearray()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, record: bool) -> None:
        try:
            while data := source.recv(65536):
                if record:
                    self.sent += data
                target.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._listener.close()


@pytest.fixture
def proxies(s3_endpoint):
    """Two endpoints in front of the one moto server (moto's state is per process: two servers would share
    it), so the requests each endpoint received tell where the bucket entries sent them."""
    pair = RecordingProxy(s3_endpoint), RecordingProxy(s3_endpoint)
    yield pair
    for proxy in pair:
        proxy.close()


def raw_client(endpoint):
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=FAKE_KEY, aws_secret_access_key=FAKE_SECRET,
                        region_name="us-east-1")


@pytest.fixture
def buckets(tmp_path, monkeypatch, s3_endpoint, proxies):
    """s3://xdpx-one behind one endpoint (env credentials), s3://xdpx-two behind the other (inline)."""
    first, second = (proxy.endpoint for proxy in proxies)
    for bucket in ("xdpx-one", "xdpx-two"):
        client = raw_client(s3_endpoint)
        if bucket not in [b["Name"] for b in client.list_buckets()["Buckets"]]:
            client.create_bucket(Bucket=bucket)
    monkeypatch.setenv("ONE_ID", ONE_ID)
    monkeypatch.setenv("ONE_PW", ONE_PW)
    path = tmp_path / "buckets.hjson"
    path.write_text(f"""{{
      // bucket -> endpoint, region and where the credentials come from
      "s3://xdpx-one": {{endpoint: "{first}", region: "eu-west-1", credentials: {{env: {{key: "ONE_ID", secret: "ONE_PW"}}}}}}
      "s3://xdpx-two": {{endpoint: "{second}", credentials: {{key: "{TWO_ID}", secret: "{TWO_SECRET}"}}}}
    }}""")
    path.chmod(0o600)
    monkeypatch.setenv("XDPX_BUCKETS", str(path))
    return path


def test_two_buckets_get_their_own_endpoint_and_credentials(buckets, proxies):
    first, second = proxies
    one, _ = xio.filesystem("s3://xdpx-one/a.txt")
    two, _ = xio.filesystem("s3://xdpx-two/a.txt")
    assert (one.key, one.secret, one.endpoint_url) == (ONE_ID, ONE_PW, first.endpoint)
    assert one.client_kwargs["region_name"] == "eu-west-1"
    assert (two.key, two.secret, two.endpoint_url) == (TWO_ID, TWO_SECRET, second.endpoint)
    with xio.open("s3://xdpx-one/dir/f.txt", "w") as f:
        f.write("first")
    with xio.open("s3://xdpx-two/dir/f.txt", "w") as f:
        f.write("second")
    xio.copy("s3://xdpx-one/dir/f.txt", "s3://xdpx-two/dir/copy.txt")  # two configurations: streamed
    with xio.open("s3://xdpx-two/dir/copy.txt") as f:
        assert f.read() == "first"
    # What each endpoint received: only its bucket's requests, signed with its bucket's key id.
    seen_first, seen_second = bytes(first.sent), bytes(second.sent)
    assert b"PUT /xdpx-one/dir/f.txt" in seen_first and b"/xdpx-two/" not in seen_first
    assert b"PUT /xdpx-two/dir/f.txt" in seen_second and b"/xdpx-one/" not in seen_second
    assert f"Credential={ONE_ID}/".encode() in seen_first and TWO_ID.encode() not in seen_first
    assert f"Credential={TWO_ID}/".encode() in seen_second and ONE_ID.encode() not in seen_second
    assert FAKE_KEY.encode() not in seen_first + seen_second  # the protocol-wide key is replaced


def test_a_missing_bucket_is_one_line_naming_the_bucket_and_the_file(buckets, tmp_path, capsys):
    with pytest.raises(BucketsError) as e:
        xio.exists("s3://xdpx-three/x.txt")
    message = str(e.value)
    assert message == (f"{buckets}: no entry for bucket 's3://xdpx-three' (listed: s3://xdpx-one, s3://xdpx-two): "
                       "add one, or a 's3://*' entry for the other buckets")
    assert x_io(["ls", "s3://xdpx-three/"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    config = tmp_path / "prepro.hjson"
    config.write_text(json.dumps(dict(data_source="s3://xdpx-three/raw", data_dir=str(tmp_path / "out"),
                                      processor="single", loader="single", tokenizer="char_zh", max_len=32)))
    assert run_chain(["x-prepro", str(config)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert xio.exists("memory://anything") is False  # protocols the file does not list are not affected


def test_unset_variables_open_files_and_wildcards(buckets, tmp_path, monkeypatch, s3_endpoint):
    monkeypatch.delenv("ONE_PW")
    with pytest.raises(BucketsError, match=r"bucket 's3://xdpx-one': environment variable ONE_PW "
                                           r"\(credentials.env.secret\) is not set"):
        xio.exists("s3://xdpx-one/x")
    shared = tmp_path / "shared.hjson"
    shared.write_text('{"s3://xdpx-one": {credentials: {key: "abcd1234", secret: "efgh5678"}}}')
    shared.chmod(0o644)
    monkeypatch.setenv("XDPX_BUCKETS", str(shared))
    with pytest.raises(BucketsError) as e:
        xio.exists("s3://xdpx-one/x")
    assert str(e.value).startswith(f"{shared}: bucket 's3://xdpx-one': credentials written in the file, which "
                                   "others can read (mode 644): chmod 600")
    assert "efgh5678" not in str(e.value)
    wildcard = tmp_path / "wild.hjson"
    wildcard.write_text(json.dumps({"s3://*": {"endpoint": s3_endpoint, "credentials": {"env": {"key": "ONE_ID",
                                                                                                 "secret": "ONE_ID"}}}}))
    monkeypatch.setenv("XDPX_BUCKETS", str(wildcard))
    fs, _ = xio.filesystem("s3://any-bucket/x")
    assert fs.key == ONE_ID and fs.endpoint_url == s3_endpoint


def test_oss_buckets_by_region_and_cli_profile(tmp_path, monkeypatch):
    profiles = tmp_path / "aliyun.json"
    profiles.write_text(json.dumps({"profiles": [
        {"name": "hz", "mode": "AK", "access_key_id": "LTAI-hz-0001", "access_key_secret": "hz-secret-0001"},
        {"name": "bj", "mode": "StsToken", "access_key_id": "STS-bj", "access_key_secret": "bj-s", "sts_token": "tk-1"}]}))
    path = tmp_path / "buckets.hjson"
    path.write_text(json.dumps({
        "oss://pretrain-lm": {"region": "cn-hangzhou", "credentials": {"profile": "hz", "profile_file": str(profiles)}},
        "oss://archive": {"endpoint": "https://oss-cn-beijing-internal.aliyuncs.com",
                          "credentials": {"profile": "bj", "profile_file": str(profiles)}}}))
    monkeypatch.setenv("XDPX_BUCKETS", str(path))
    hz = credentials.storage_options("oss", "oss://pretrain-lm/corpus/a.txt")
    assert (hz["endpoint"], hz["key"], hz["secret"]) == ("https://oss-cn-hangzhou.aliyuncs.com", "LTAI-hz-0001",
                                                         "hz-secret-0001")
    bj = credentials.storage_options("oss", "oss://archive/x")
    assert (bj["endpoint"], bj["key"], bj["token"]) == ("https://oss-cn-beijing-internal.aliyuncs.com", "STS-bj", "tk-1")
    with pytest.raises(BucketsError, match="no entry for bucket 'oss://other'"):
        credentials.storage_options("oss", "oss://other/x")
    assert credentials.storage_options("s3", "s3://b/x").get("key") != "LTAI-hz-0001"  # s3 is not listed
    assert xio.redact("failed: hz-secret-0001 / tk-1 / LTAI-hz-0001") == "failed: *** / *** / ***"


def test_a_run_over_two_buckets_writes_no_secret(buckets, tmp_path, capsys):
    for name in ("train.txt", "dev.txt"):
        xio.copy(str(REVIEWS / name), f"s3://xdpx-one/raw/{name}")
    config = tmp_path / "prepro.hjson"
    config.write_text(json.dumps(dict(data_source="s3://xdpx-one/raw", data_dir="s3://xdpx-two/prepared",
                                      processor="single", loader="single", tokenizer="char_zh", max_len=32)))
    assert run_chain(["x-prepro", str(config)]) == 0
    printed = "".join(capsys.readouterr())
    written = {name: xio.open(f"s3://xdpx-two/prepared/{name}").read() for name in ("log.txt", "args.py", "meta.hjson")}
    assert "train: 240 samples" in written["log.txt"] and "s3://xdpx-one/raw" in written["args.py"]
    for secret in (ONE_ID, ONE_PW, TWO_ID, TWO_SECRET):
        assert secret not in printed and all(secret not in text for text in written.values())
    # Values read from variables with harmless names are masked all the same, once the file names them.
    assert xio.redact(f"connect failed for {ONE_PW} at {TWO_SECRET}") == "connect failed for *** at ***"
    assert os.environ["ONE_PW"] == ONE_PW
