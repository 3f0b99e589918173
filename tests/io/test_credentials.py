"""Storage options and credentials: precedence, the io config file, and secrets never shown."""

from __future__ import annotations

import json
import logging

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

import xdpx.io as xio
from xdpx.io import credentials
from xdpx.io.cli import main as x_io

SECRET = "Zr8-very-secret-value-41"
KEY_ID = "AKIDEXAMPLE0042"


class _EchoingFS(MemoryFileSystem):
    """A backend that, like many, repeats its options in the error it raises."""

    protocol = "xdpxecho"

    def __init__(self, **options):
        if options.get("fail"):
            raise RuntimeError(f"bad configuration: {options}")
        super().__init__()


fsspec.register_implementation("xdpxecho", _EchoingFS, clobber=True)


def test_redact_masks_secret_names_and_known_values():
    xio.set_storage_options("s3", key=KEY_ID, secret=SECRET)
    opts = {"endpoint_url": "http://h:9000", "key": KEY_ID, "secret": SECRET, "client_kwargs": {"token": "t0k3n"}}
    red = xio.redact(opts)
    assert red == {"endpoint_url": "http://h:9000", "key": "***", "secret": "***", "client_kwargs": {"token": "***"}}
    assert SECRET not in repr(red) and KEY_ID not in repr(red)
    assert xio.redact(f"failed with {SECRET} and {KEY_ID}") == "failed with *** and ***"  # configured values
    assert xio.redact("aws_secret_access_key=abc123xyz, Key=data/a.txt") == "aws_secret_access_key=***, Key=data/a.txt"
    assert xio.redact(["password: hunter22"]) == ["password: ***"]


def test_secret_environment_variables_are_masked(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "env-token-value-77")
    assert xio.redact("header env-token-value-77") == "header ***"


def test_filesystem_creation_error_does_not_leak_options():
    xio.set_storage_options("xdpxecho", secret=SECRET, fail=True)
    with pytest.raises(ValueError) as e:
        xio.exists("xdpxecho://b/k")
    text = str(e.value) + repr(e.value)
    assert SECRET not in text and "***" in text and "xdpxecho://b/k" in text
    assert e.value.__cause__ is None and e.value.__suppress_context__  # no chained traceback with the options


def test_cli_error_lines_are_redacted(capsys):
    xio.set_storage_options("xdpxecho", secret=SECRET, fail=True)
    assert x_io(["exists", "xdpxecho://b/k"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("x-io: error:") and SECRET not in err


def test_writer_repr_and_errors_do_not_show_secrets(s3_root, caplog):
    xio.set_storage_options("s3", key=credentials.storage_options("s3")["key"], secret=SECRET)
    caplog.set_level(logging.DEBUG)  # botocore / s3fs / fsspec log a lot at debug level
    # moto accepts any signature, so the test credentials still work
    with xio.open(f"{s3_root}/a.txt", "w") as f:
        assert SECRET not in repr(f)
        f.write("x")
    with xio.open(f"{s3_root}/a.txt") as f:
        assert f.read() == "x"
    assert xio.listdir(s3_root) == ["a.txt"]
    assert caplog.text and SECRET not in caplog.text  # debug logs of xdpx, s3fs, botocore: no secret
    with pytest.raises(FileNotFoundError) as e:
        xio.open(f"{s3_root}/{SECRET}.txt")  # even a secret inside a path (signed URLs) is masked in messages
    assert SECRET not in str(e.value) and "***" in str(e.value)


def test_io_config_file_and_precedence(tmp_path, monkeypatch):
    cfg = tmp_path / "io.hjson"
    cfg.write_text(
        "{\n  # hjson: comments allowed\n"
        "  s3: {\n    endpoint_url: http://from-file:1\n    key: k1\n    secret: s1\n  }\n"
        '  gcs: {token: "anon"}\n}\n'
    )
    monkeypatch.setenv("XDPX_IO_CONFIG", str(cfg))
    credentials.reset_storage_options()
    opts = credentials.storage_options("s3a")
    assert opts["endpoint_url"] == "http://from-file:1" and opts["key"] == "k1"
    assert opts["use_listings_cache"] is False  # built-in default kept
    assert credentials.storage_options("gs")["token"] == "anon"  # gcs:// is gs://
    xio.configure({"s3": {"key": "k2"}})
    assert credentials.storage_options("s3")["key"] == "k2"
    assert credentials.storage_options("s3")["secret"] == "s1"  # merged key by key
    xio.set_storage_options("s3", key="k3")
    assert credentials.storage_options("s3")["key"] == "k3"
    jcfg = tmp_path / "io.json"
    jcfg.write_text(json.dumps({"s3": {"region_name": "eu-west-1"}}))
    xio.configure(str(jcfg))
    assert credentials.storage_options("s3")["region_name"] == "eu-west-1"


def test_bad_io_config_file_errors_are_clear_and_redacted(tmp_path, monkeypatch):
    bad = tmp_path / "bad.hjson"
    bad.write_text(f'{{ s3: {{ secret: "{SECRET}" ]]] }}')
    with pytest.raises(ValueError) as e:
        xio.configure(str(bad))
    assert str(bad) in str(e.value) and SECRET not in str(e.value)
    with pytest.raises(ValueError, match="io config file not found"):
        xio.configure(str(tmp_path / "missing.hjson"))
    with pytest.raises(ValueError, match="options for 's3' must be a mapping"):
        xio.configure({"s3": "not a dict"})  # type: ignore[dict-item]


def test_missing_backend_error_names_the_package(monkeypatch):
    def no_backend(protocol):
        raise ImportError("simulated")

    monkeypatch.setattr(fsspec, "get_filesystem_class", no_backend)
    with pytest.raises(ImportError, match=r"pip install gcsfs.*gs://b/x"):
        xio.exists("gs://b/x")
    with pytest.raises(ImportError, match=r"oss://b/x needs the optional package ossfs: pip install 'xdpx\[oss\]'"):
        xio.exists("oss://b/x")


def test_unknown_scheme():
    with pytest.raises(ValueError, match="unsupported path scheme nosuchfs://"):
        xio.exists("nosuchfs://x/y")
