"""oss:// : the storage options xdpx.io hands to ossfs (io config, OSS_* environment variables), the errors
for a missing backend or endpoint, the real ossfs class built through xdpx.io with those options, and
object bodies written and read by it over the OSS protocol (oss2's signed requests) against the loopback
S3 server (moto), checked from the S3 side.

What cannot be tested offline: listings and metadata. moto answers ``GET /?prefix=`` with S3's XML, whose
tags carry the namespace http://s3.amazonaws.com/doc/2006-03-01/; oss2 looks its tags up without one
("parse xml: IsTruncated could not be found under {...}ListBucketResult"), and ``GET /?bucketInfo`` is
OSS-only. So ls/info/exists, and xdpx.io.open for reading (it asks the size first), are not covered.
"""

from __future__ import annotations

import re
import uuid

import fsspec
import pytest

import xdpx.io as xio
from xdpx.io import credentials

ENDPOINT = "https://oss-cn-hangzhou.aliyuncs.com"
SECRET = "oss-secret-Value-9876"


@pytest.fixture
def no_oss_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OSS_ENDPOINT", "OSS_ACCESS_KEY_ID", "OSS_ACCESS_KEY_SECRET", "OSS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)


def test_storage_options_from_oss_environment_variables(monkeypatch, no_oss_env):
    monkeypatch.setenv("OSS_ENDPOINT", ENDPOINT)
    monkeypatch.setenv("OSS_ACCESS_KEY_ID", "LTAIexampleid")
    monkeypatch.setenv("OSS_ACCESS_KEY_SECRET", SECRET)
    opts = credentials.storage_options("oss")
    assert opts == {"endpoint": ENDPOINT, "key": "LTAIexampleid", "secret": SECRET, "use_listings_cache": False}
    xio.configure({"oss": {"key": "from-config"}})  # the io config beats the environment
    assert credentials.storage_options("oss")["key"] == "from-config"
    assert SECRET not in xio.redact(f"request failed for {opts}")  # env secrets are masked in messages


def test_missing_ossfs_says_how_to_install(monkeypatch):
    real = fsspec.get_filesystem_class

    def without_ossfs(protocol: str):
        if protocol == "oss":
            raise ImportError("Install ossfs to access Alibaba Object Storage System")
        return real(protocol)

    monkeypatch.setattr(fsspec, "get_filesystem_class", without_ossfs)
    with pytest.raises(ImportError) as e:
        xio.exists("oss://bucket/x.txt")
    assert re.search(r"pip install ('?xdpx\[oss\]'?|ossfs)", str(e.value)) and "oss://bucket/x.txt" in str(e.value)


def test_missing_endpoint_is_a_clear_error(monkeypatch, no_oss_env):
    monkeypatch.setattr(fsspec, "get_filesystem_class", lambda protocol: object)  # as if ossfs were installed
    xio.set_storage_options("oss", key="LTAIexampleid", secret=SECRET)
    with pytest.raises(ValueError) as e:
        xio.open("oss://bucket/x.txt")
    msg = str(e.value)
    assert "need an endpoint" in msg and "OSS_ENDPOINT" in msg and "XDPX_IO_CONFIG" in msg
    assert "oss://bucket/x.txt" in msg and SECRET not in msg


def test_ossfs_filesystem_gets_the_configured_options(no_oss_env):
    ossfs = pytest.importorskip(
        "ossfs",
        reason="ossfs is not installed (it is optional: pip install ossfs). oss:// is tested at the unit "
        "level only, and this part needs the real ossfs class",
    )
    xio.set_storage_options("oss", endpoint=ENDPOINT, key="LTAIexampleid", secret=SECRET)
    fs, p = xio.filesystem("oss://bucket/dir/f.txt")
    assert isinstance(fs, ossfs.OSSFileSystem)
    assert fs._endpoint == ENDPOINT
    assert p.lstrip("/") == "bucket/dir/f.txt"
    assert SECRET not in repr(fs)
    from xdpx.io.backends import is_object_store, read_kwargs

    assert is_object_store(fs) and read_kwargs(fs) == {"block_size": 4 * 2**20}
    assert xio.protocol_of("oss://bucket/x") == "oss" and xio.dirname("oss://bucket/d/x") == "oss://bucket/d"


def test_ossfs_writes_and_reads_objects_over_the_oss_protocol(no_oss_env, s3_endpoint):
    ossfs = pytest.importorskip("ossfs", reason="pip install 'xdpx[oss]'")
    from tests.conftest import BUCKET

    xio.set_storage_options("oss", endpoint=s3_endpoint, key="LTAIexampleid", secret=SECRET)
    key = f"{BUCKET}/oss-{uuid.uuid4().hex[:8]}"
    fs, path = xio.filesystem(f"oss://{key}/written-by-ossfs.txt")
    assert isinstance(fs, ossfs.OSSFileSystem) and fs._endpoint == s3_endpoint
    body = "über OSS: 对象存储\n".encode() * 1000
    fs.pipe_file(path, body)  # a PUT signed the OSS way ("Authorization: OSS key:signature")
    assert xio.open(f"s3://{key}/written-by-ossfs.txt", "rb").read() == body  # the object as S3 sees it
    with xio.open(f"s3://{key}/written-by-s3.bin", "wb") as f:
        f.write(bytes(range(256)) * 64)
    assert fs.cat_file(f"{key}/written-by-s3.bin") == bytes(range(256)) * 64
